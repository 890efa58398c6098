"""Capacity pinned at approval: a lender may offer less at once, never more without an operator."""

from __future__ import annotations

import pytest

from jobs.models import Job
from nodes import services, transitions
from nodes.models import EventKind, Node
from nodes.policy import capacity_to_pin, pin_capacity
from tests.jobs.conftest import seed_body
from tests.nodes.conftest import resources

pytestmark = pytest.mark.django_db

GIB = 1 << 30
CORES_1000 = 1_000_000


# --- the pure rule --------------------------------------------------------------------------------
def test_nothing_pinned_writes_the_report_as_it_is():
    fields = {"cpu_milli": 9000, "memory_bytes": 1, "disk_bytes": None}
    assert pin_capacity(fields, {"cpu_milli": None, "memory_bytes": None, "disk_bytes": None}) == {
        **fields,
        "pending_capacity": {},
    }


def test_a_report_above_the_pinned_figure_is_held_there_and_pending():
    out = pin_capacity({"cpu_milli": CORES_1000, "memory_bytes": 2 * GIB, "disk_bytes": 5}, {
        "cpu_milli": 4000, "memory_bytes": 8 * GIB, "disk_bytes": 10,
    })  # fmt: skip
    assert out["cpu_milli"] == 4000 and out["memory_bytes"] == 2 * GIB and out["disk_bytes"] == 5
    assert out["pending_capacity"] == {"cpu_milli": CORES_1000}


def test_an_unknown_disk_is_not_less_than_the_approved_one():
    out = pin_capacity({"disk_bytes": None}, {"disk_bytes": 10 * GIB})
    assert out["disk_bytes"] == 10 * GIB and out["pending_capacity"] == {}


def test_approving_pins_what_the_node_reports_and_never_what_is_pending():
    node = Node(cpu_milli=4000, memory_bytes=GIB, disk_bytes=None, pending_capacity={"cpu_milli": 8000})
    assert capacity_to_pin(node) == {"cpu_milli": 4000, "memory_bytes": GIB, "disk_bytes": None, "runtimes": []}


def test_approving_again_keeps_each_figure_pinned_before():
    node = Node(cpu_milli=4000, approved_cpu_milli=4000, memory_bytes=GIB, approved_memory_bytes=GIB, disk_bytes=5,
                runtimes=[], approved_runtimes=[], pending_capacity={"cpu_milli": CORES_1000})  # fmt: skip
    assert capacity_to_pin(node) == {"disk_bytes": 5}  # the one never pinned (unknown at the first approval)


# --- black box: the node protocol, the API, the scheduler -------------------------------------------
@pytest.fixture
def approved_4_cores(project, owner, enroll):
    token, secret = services.enrollment_token_create(project=project, by=owner)
    node, cred = enroll(secret, name="lender-1")  # reports 4 cores (tests.nodes.conftest.resources)
    node = services.node_approve(node=node)
    assert (node.cpu_milli, node.approved_cpu_milli) == (4000, 4000)
    return node, cred


def _submit(api, cpu_milli: int) -> int:
    r = api.post("/api/v1/jobs", seed_body(cpu_milli=cpu_milli), format="json")
    assert r.status_code == 201, r.json()
    return r.json()["id"]


def _schedule() -> None:
    from jobs.scheduling import cycle

    cycle.one_pass()


def test_a_node_approved_at_4_cores_that_reports_1000_gets_no_job_above_4_and_the_api_shows_the_change(
    approved_4_cores, heartbeat, api
):
    node, cred = approved_4_cores
    for _ in range(3):  # the first takes the full path, the others the fast one
        assert heartbeat(cred, cpu_milli=CORES_1000).status_code == 200
    shown = api.get(f"/api/v1/nodes/{node.pk}").json()
    assert shown["cpu_milli"] == 4000 and shown["approved_cpu_milli"] == 4000
    assert shown["pending_capacity"] == {"cpu_milli": CORES_1000}
    listed = api.get("/api/v1/nodes").json()["own"]
    assert [n["pending_capacity"] for n in listed] == [{"cpu_milli": CORES_1000}]

    big = [_submit(api, cpu) for cpu in (4001, 8000, 64000)]
    fits = _submit(api, 4000)
    _schedule()
    assert set(Job.objects.filter(pk__in=big).values_list("state", flat=True)) == {"queued"}
    assert Job.objects.get(pk=fits).state == "assigned"


def test_a_lower_report_lowers_the_capacity_at_once_and_it_may_come_back_up_to_the_approved_figure(
    approved_4_cores, heartbeat
):
    node, cred = approved_4_cores
    heartbeat(cred, cpu_milli=CORES_1000)
    heartbeat(cred, cpu_milli=2000)
    node.refresh_from_db()
    assert (node.cpu_milli, node.pending_capacity) == (2000, {})
    heartbeat(cred, cpu_milli=4000)
    node.refresh_from_db()
    assert (node.cpu_milli, node.pending_capacity) == (4000, {})


def test_an_operator_approves_the_pending_change_in_the_admin_and_the_scheduler_then_uses_it(
    approved_4_cores, heartbeat, api, client, make_user
):
    node, cred = approved_4_cores
    heartbeat(cred, cpu_milli=16000)
    job = _submit(api, 8000)
    _schedule()
    assert Job.objects.get(pk=job).state == "queued"

    client.force_login(make_user("ops", staff=True))
    r = client.post("/admin/nodes/node/", {"action": "approve_capacity", "_selected_action": [node.pk]})
    assert r.status_code == 302
    node.refresh_from_db()
    assert (node.cpu_milli, node.approved_cpu_milli, node.pending_capacity) == (16000, 16000, {})
    event = node.events.get(kind=EventKind.CAPACITY_APPROVED)
    assert event.data == {"before": {"cpu_milli": 4000}, "after": {"cpu_milli": 16000}}
    assert client.get(f"/admin/nodes/node/{node.pk}/change/").status_code == 200

    heartbeat(cred, cpu_milli=16000)  # its next heartbeat keeps the approved figure
    node.refresh_from_db()
    assert node.cpu_milli == 16000 and node.pending_capacity == {}
    _schedule()
    assert Job.objects.get(pk=job).state == "assigned"


def test_approving_a_node_with_nothing_pending_changes_nothing(approved_4_cores):
    node, _ = approved_4_cores
    again = transitions.node_capacity_approve(node=node)
    assert again.approved_cpu_milli == 4000 and not again.events.filter(kind=EventKind.CAPACITY_APPROVED).exists()


def test_re_approving_an_approved_node_keeps_its_pinned_capacity(approved_4_cores, heartbeat):
    node, cred = approved_4_cores
    heartbeat(cred, cpu_milli=CORES_1000)
    node = services.node_approve(node=node, trust="community")
    assert (node.cpu_milli, node.approved_cpu_milli) == (4000, 4000)
    assert node.pending_capacity == {"cpu_milli": CORES_1000}


def test_memory_and_disk_are_pinned_like_cpu(approved_4_cores, heartbeat):
    node, cred = approved_4_cores
    Node.objects.filter(pk=node.pk).update(approved_disk_bytes=10 * GIB, disk_bytes=10 * GIB)
    services.node_set_trust(node=node, trust="untrusted")  # a saved row: the caches drop it
    heartbeat(cred, memory_bytes=64 * GIB, disk_bytes=100 * GIB)
    node.refresh_from_db()
    assert (node.memory_bytes, node.disk_bytes) == (8 * GIB, 10 * GIB)
    assert node.pending_capacity == {"memory_bytes": 64 * GIB, "disk_bytes": 100 * GIB}


def test_a_heartbeat_cannot_add_a_label(approved_4_cores, node_client):
    node, cred = approved_4_cores
    body = {"agent_version": "t", "resources": {"cpu_milli": 1, "memory_bytes": 1}, "labels": {"gpu": "h100"}}
    r = node_client(cred).post("/node-api/v1/heartbeat", body, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_heartbeat"
    node.refresh_from_db()
    assert node.labels == {}


def test_the_approvenode_command_approves_the_pending_capacity(approved_4_cores, heartbeat):
    import io

    from django.core.management import call_command

    node, cred = approved_4_cores
    heartbeat(cred, cpu_milli=8000)
    out = io.StringIO()
    call_command("approvenode", node.name, "--capacity", stdout=out)
    assert "cpu_milli 8000, pending capacity none" in out.getvalue()
    node.refresh_from_db()
    assert (node.cpu_milli, node.approved_cpu_milli) == (8000, 8000)


def test_re_approval_after_a_gpu_change_keeps_the_approved_capacity_and_the_pending_change_waits(
    project, owner, enroll, heartbeat, client, make_user
):
    from audit.models import AuditEvent
    from tests.nodes.conftest import gpu

    _, secret = services.enrollment_token_create(project=project, by=owner)
    node, cred = enroll(secret, name="lender-gpu", resources=resources(gpus=[gpu("GPU-a", memory=80 << 30)]))
    node = services.node_approve(node=node)
    heartbeat(cred, cpu_milli=CORES_1000, gpus=[gpu("GPU-a", memory=80 << 30)])  # held: pending
    heartbeat(cred, cpu_milli=CORES_1000, gpus=[gpu("GPU-a", memory=(80 << 30) + 1)])  # one byte: back to pending
    node.refresh_from_db()
    assert node.approval == "pending" and node.pending_capacity == {"cpu_milli": CORES_1000}

    ops = make_user("ops", staff=True)
    node = services.node_approve(node=node, by=ops)  # the routine GPU change
    assert node.approval == "approved" and (node.cpu_milli, node.approved_cpu_milli) == (4000, 4000)
    assert node.pending_capacity == {"cpu_milli": CORES_1000}
    assert not node.events.filter(kind=EventKind.CAPACITY_APPROVED).exists()

    client.force_login(ops)  # the pending capacity has its own action: an event and an audit entry of its own
    assert (
        client.post("/admin/nodes/node/", {"action": "approve_capacity", "_selected_action": [node.pk]}).status_code
        == 302
    )
    node.refresh_from_db()
    assert (node.cpu_milli, node.approved_cpu_milli, node.pending_capacity) == (CORES_1000, CORES_1000, {})
    assert node.events.get(kind=EventKind.CAPACITY_APPROVED).by == ops
    entry = AuditEvent.objects.filter(target=f"node:{node.name}", details__has_key="capacity").get()
    assert entry.details["capacity"] == {"before": {"cpu_milli": 4000}, "after": {"cpu_milli": CORES_1000}}
