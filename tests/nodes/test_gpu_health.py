"""GPU health on the server: the events a report's changes write, the free GPUs shown, and the operator's reset
through the service, the admin action and `manage.py resetgpu`."""

import io

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from nodes import gpuhealth, selectors
from nodes.models import EventKind, Node, NodeEvent

from .test_operations import run_action  # noqa: F401

pytestmark = pytest.mark.django_db

GIB = 1 << 30


def gpu(i, healthy=True, reason=""):
    return {"uuid": f"GPU-{i}", "index": i, "model": "NVIDIA A10", "memory_bytes": 24 * GIB, "healthy": healthy,
            "health_reason": reason}  # fmt: skip


@pytest.fixture
def sick():
    return Node.objects.create(name="sick", trust="platform", approval="approved", online=True,
                               gpus=[gpu(0), gpu(1, False, "XID 48"), gpu(2, False, "1 uncorrected ECC error")])  # fmt: skip


def test_health_changes_name_only_the_gpus_that_flipped():
    before = [gpu(0), gpu(1, False, "XID 79"), gpu(2)]
    after = [gpu(0), gpu(1), gpu(2, False, "XID 48")]
    assert [(g["uuid"], healthy) for g, healthy in gpuhealth.health_changes(before, after)] == [
        ("GPU-1", True), ("GPU-2", False)]  # fmt: skip
    assert gpuhealth.health_changes([{"uuid": "GPU-0", "index": 0}], [gpu(0)]) == []  # older agents: healthy


def test_an_unhealthy_gpu_is_not_counted_free_in_the_pool(sick):
    assert [g["uuid"] for g in selectors.free_gpus(sick)] == ["GPU-0"]
    assert selectors.pool_summary([sick])["by_gpu_model"] == [{"model": "NVIDIA A10", "total": 3, "free": 1}]


def test_a_reset_asks_the_agent_once_per_gpu_with_an_event_and_an_audit_row(sick, make_user):
    ops = make_user("ops", staff=True)
    assert gpuhealth.node_gpu_reset(node=sick, uuid="GPU-1", by=ops) == ["GPU-1"]
    assert gpuhealth.node_gpu_reset(node=sick, by=ops) == ["GPU-1", "GPU-2"]
    sick.refresh_from_db()
    assert sick.gpu_resets == {"GPU-1": 2, "GPU-2": 1}
    events = NodeEvent.objects.filter(node=sick, kind=EventKind.GPU_RESET)
    assert events.count() == 3 and "GPU 1 (GPU-1) reset requested (was: XID 48)" in events.last().message
    assert AuditEvent.objects.filter(action="node.gpu_reset").count() == 2


def test_the_admin_action_resets_the_selected_nodes_unhealthy_gpus(sick, run_action):  # noqa: F811
    healthy = Node.objects.create(name="fine", gpus=[gpu(0)])
    msgs = run_action("reset_gpus", Node.objects.all())
    assert sorted(Node.objects.get(pk=sick.pk).gpu_resets) == ["GPU-1", "GPU-2"]
    assert Node.objects.get(pk=healthy.pk).gpu_resets == {}
    assert any("fine: Node fine: every GPU is healthy." in m for m in msgs)


def test_the_command_lists_then_resets(sick):
    out = io.StringIO()
    call_command("resetgpu", "sick", stdout=out)
    assert out.getvalue().splitlines() == ["GPU-1\tGPU 1\tXID 48", "GPU-2\tGPU 2\t1 uncorrected ECC error"]
    out = io.StringIO()
    call_command("resetgpu", "sick", "--gpu", "GPU-2", stdout=out)
    assert out.getvalue() == "sick: reset of GPU-2 sent to its agent\n"
    with pytest.raises(CommandError, match="has no GPU GPU-9"):
        call_command("resetgpu", "sick", "--gpu", "GPU-9")
    with pytest.raises(CommandError, match="GPU GPU-0 is healthy"):
        call_command("resetgpu", "sick", "--gpu", "GPU-0")
    with pytest.raises(CommandError, match="no node named"):
        call_command("resetgpu", "nope", "--all")
