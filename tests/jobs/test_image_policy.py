"""The image policy at submit (400 forbidden_image_registry, no connection made) and in the scheduler (the
lender's allowed images, with a pending reason); the node's patterns reach the scheduler through heartbeats."""

from __future__ import annotations

import pytest

from jobs.models import Job
from jobs.scheduling import cycle, policy
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot
from nodeagent import imageref, protocol
from nodes.policy import resource_fields
from tests.nodeagent.test_images import Listener

from .conftest import seed_body

GIB = 1024**3
IMAGE_REASON = "do not allow the job's image (their lenders' EULER_NODE_ALLOWED_IMAGES)"


@pytest.fixture
def listener():
    found = Listener()
    yield found
    found.close()


@pytest.mark.django_db
def test_loopback_local_and_private_registries_are_refused_at_submit_without_a_connection(api, listener, monkeypatch):
    answers = {"registry.corp": ["10.1.2.3"], "sneaky.example": ["127.0.0.1"]}
    monkeypatch.setattr(imageref, "resolver", lambda host: answers[host])
    for image in (
        f"127.0.0.1:{listener.port}/x",
        f"localhost:{listener.port}/x",
        f"sneaky.example:{listener.port}/x",
        "10.1.2.3:5000/x",
        "registry.corp/team/app:1",
        "[::1]:5000/x",
        "169.254.169.254/x",
    ):
        r = api.post("/api/v1/jobs", seed_body(image=image), format="json")
        assert r.status_code == 400, image
        assert r.json()["code"] == "forbidden_image_registry"
        assert "refused by the image policy" in r.json()["detail"]
    assert listener.accepted == 0
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_the_operators_allow_list_opens_a_registry(api, settings, monkeypatch):
    monkeypatch.setattr(imageref, "resolver", lambda host: {"registry.lan": ["10.0.0.9"]}[host])
    settings.EULER_ALLOWED_REGISTRIES = ["registry.lan:5000", "10.1.2.3"]
    for image in ("registry.lan:5000/team/app:1", "10.1.2.3:5000/x"):
        assert api.post("/api/v1/jobs", seed_body(image=image), format="json").status_code == 201
    r = api.post("/api/v1/jobs", seed_body(image="registry.lan:5001/x"), format="json")
    assert r.json()["code"] == "forbidden_image_registry"


@pytest.mark.django_db
def test_hub_images_and_names_that_do_not_resolve_here_are_accepted(api, monkeypatch):
    monkeypatch.setattr(imageref, "resolver", lambda host: [])
    for image in ("alpine:3.20", "ghcr.io/org/tool:1", f"euler-test/busybox@sha256:{'b' * 64}"):
        assert api.post("/api/v1/jobs", seed_body(image=image), format="json").status_code == 201


def test_a_node_that_does_not_allow_the_image_is_filtered_with_a_pending_reason():
    narrow = NodeSnapshot(id=1, cpu_milli=64000, memory_bytes=8 * GIB, image_patterns=("ghcr.io/org/*",))
    plain = NodeSnapshot(id=2, cpu_milli=4000, memory_bytes=8 * GIB)
    jobs = [
        JobSnapshot(id=1, project_id=1, cpu_milli=1000, memory_bytes=GIB, image="alpine:3.20"),
        JobSnapshot(id=2, project_id=1, cpu_milli=1000, memory_bytes=GIB, image="ghcr.io/org/tool:1", queued_at=1),
    ]
    plan = policy.place(jobs, [narrow, plain], now=0)
    assert {p.job_id: p.node_id for p in plan.placements} == {1: 2, 2: 1}
    plan = policy.place(jobs[:1], [narrow], now=0)
    assert plan.pending[1] == f"no node fits: 1 {IMAGE_REASON}"


@pytest.mark.django_db
def test_the_patterns_a_node_reports_reach_the_scheduler(make_node):
    res = protocol.Resources(cpu_milli=4000, memory_bytes=8 * GIB, allowed_images=["ghcr.io/org/*"])
    fields = resource_fields(res)
    node = make_node(allowed_images=fields["allowed_images"])
    snaps, _ = cycle.node_rows()
    assert next(s for s in snaps if s.id == node.id).image_patterns == ("ghcr.io/org/*",)
