import io

import pytest
from django.contrib.admin.sites import site
from django.core.management import call_command
from django.test import RequestFactory

from euler.errors import InvalidInput
from nodes import services
from nodes.admin import ACTIONS, NodeAdmin
from nodes.models import Approval, EventKind, Node, TrustLevel

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes():
    return [Node.objects.create(name=f"n{i}", trust="community") for i in range(2)]


@pytest.fixture
def run_action(make_user):
    admin_user = make_user("admin", staff=True)
    rf = RequestFactory()

    def run(name: str, queryset):
        from django.contrib.messages.storage.fallback import FallbackStorage

        request = rf.post("/admin/nodes/node/")
        request.user = admin_user
        request.session = {}
        request._messages = FallbackStorage(request)
        action = next(a for a in ACTIONS if a.__name__ == name)
        action(NodeAdmin(Node, site), request, queryset)
        return [str(m) for m in request._messages]

    return run


EXPECT = {
    "approve_platform": {"approval": "approved", "trust": "platform", "public_pool": True},
    "approve_community": {"approval": "approved", "trust": "community", "public_pool": True},
    "approve_untrusted": {"approval": "approved", "trust": "untrusted", "public_pool": False},
    "reject": {"approval": "rejected"},
    "trust_platform": {"trust": "platform"},
    "trust_community": {"trust": "community"},
    "trust_untrusted": {"trust": "untrusted", "public_pool": False},
    "admit_public_pool": {"public_pool": True},
    "drain": {"draining": True},
    "revoke_credential": {"credential_lookup": None},
}


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_each_admin_bulk_action_applies_to_every_selected_node_with_an_event(name, nodes, run_action):
    Node.objects.update(credential_lookup=None)
    msgs = run_action(name, Node.objects.all())
    assert any("2 node(s)" in m for m in msgs), msgs
    for node in Node.objects.all():
        for field, value in EXPECT[name].items():
            assert getattr(node, field) == value, (name, field)
    if name != "drain" or True:
        assert all(n.events.exists() for n in Node.objects.all())


def test_undrain_and_remove_from_pool_actions(nodes, run_action):
    run_action("drain", Node.objects.all())
    run_action("admit_public_pool", Node.objects.all())
    run_action("undrain", Node.objects.all())
    run_action("remove_public_pool", Node.objects.all())
    assert not Node.objects.filter(draining=True).exists() and not Node.objects.filter(public_pool=True).exists()


def test_an_action_that_fails_for_one_node_reports_it_and_goes_on(run_action):
    Node.objects.create(name="u", trust="untrusted")
    Node.objects.create(name="c", trust="community")
    msgs = run_action("admit_public_pool", Node.objects.all())
    assert any("1 node(s)" in m for m in msgs) and any(m.startswith("u:") for m in msgs)


def test_an_untrusted_node_cannot_join_the_public_pool():
    node = Node.objects.create(name="u", trust="untrusted")
    with pytest.raises(InvalidInput):
        services.node_set_public_pool(node=node, public=True)


def test_approval_pins_the_current_gpu_set():
    node = Node.objects.create(name="g", gpus=[{"uuid": "GPU-1", "index": 0, "model": "A10", "memory_bytes": 1}])
    node = services.node_approve(node=node)
    assert node.gpu_fingerprint and node.approval == Approval.APPROVED


def test_createenrollmenttoken_prints_the_token_alone_as_its_last_line(project):
    out = io.StringIO()
    call_command("createenrollmenttoken", "--project", project.name, "--ttl", "600", stdout=out, stderr=io.StringIO())
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith("euler_enroll_") and " " not in last


def test_approvenode_and_drainnode_commands(nodes):
    out = io.StringIO()
    call_command("approvenode", "n0", "--trust", "platform", "--public", stdout=out)
    node = Node.objects.get(name="n0")
    assert node.approval == "approved" and node.trust == TrustLevel.PLATFORM and node.public_pool
    call_command("drainnode", "n0", stdout=out)
    assert Node.objects.get(name="n0").draining
    call_command("drainnode", "n0", "--undo", stdout=out)
    assert not Node.objects.get(name="n0").draining
    assert node.events.filter(kind=EventKind.UNDRAINED).exists()


def test_approvenode_of_an_unknown_node_is_a_clear_error():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no node named"):
        call_command("approvenode", "ghost")


def test_the_admin_changelist_renders(client, make_user, nodes):
    client.force_login(make_user("root", staff=True))
    assert client.get("/admin/nodes/node/").status_code == 200


def test_the_admin_list_heads_its_columns_and_shows_live_times_read_once_per_page(client, make_user, monkeypatch):
    from datetime import UTC, datetime

    from nodes import livestore

    nodes = [Node.objects.create(name=f"live{i}", trust="community") for i in range(3)]
    live = datetime(2026, 11, 30, 12, 34, 56, tzinfo=UTC)
    reads = []

    def seen_many(ids):
        reads.append(sorted(ids))
        return {n.pk: live.timestamp() for n in nodes}

    monkeypatch.setattr(livestore, "seen_many", seen_many)
    client.force_login(make_user("root", staff=True))
    page = client.get("/admin/nodes/node/").content.decode()
    assert "column-last_seen" in page and "column-gpu_summary" in page
    assert ">GPUs<" in page and ">Last seen<" in page
    assert reads == [sorted(n.pk for n in nodes)]  # one read for the whole page
    assert page.count('field-last_seen nowrap">Nov. 30, 2026, 12:34 p.m.<') == 3  # the live time, not the row's
