"""Isolation tiers: trust levels' minimum, a job's `isolation`, the scheduler's filter, reason and runtime choice,
and runtimes pinned at approval like capacity."""

from __future__ import annotations

import pytest

from jobs.models import Attempt, Job
from jobs.scheduling import isolation as tiers
from jobs.scheduling import policy
from jobs.scheduling.isolation import Runtime
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot
from nodes import services
from tests.jobs.conftest import seed_body
from tests.nodes.conftest import enroll, heartbeat, node_client, resources  # noqa: F401 - fixtures

GIB = 1024**3
RUNC = Runtime("runc", sandbox=False, networks=frozenset({"none", "default"}), default=True)
RUNSC = Runtime("runsc", sandbox=True, networks=frozenset({"none"}))
RUNSC_NET = Runtime("runsc-net", sandbox=True, networks=frozenset({"none", "default"}))


def node(id, **over) -> NodeSnapshot:
    base = dict(id=id, name=f"n{id}", cpu_milli=4000, memory_bytes=8 * GIB, trust="platform")
    return NodeSnapshot(**(base | over))


def community(id, **over) -> NodeSnapshot:
    return node(id, trust="community", public_pool=True, min_isolation="sandbox", **over)


def job(id, **over) -> JobSnapshot:
    return JobSnapshot(**(dict(id=id, project_id=1, cpu_milli=1000, memory_bytes=GIB, queued_at=float(id)) | over))


# --- the settings -------------------------------------------------------------------------------------
def test_by_default_community_nodes_need_a_sandbox_and_platform_and_untrusted_ones_run_runc():
    assert tiers.parse_trust_min("") == {"platform": "runc", "community": "sandbox", "untrusted": "runc"}


def test_an_operator_changes_the_minimum_per_trust_level():
    table = tiers.parse_trust_min("untrusted=sandbox, platform=sandbox")
    assert table == {"platform": "sandbox", "community": "sandbox", "untrusted": "sandbox"}
    assert tiers.parse_trust_min("community=runc")["community"] == "runc"
    for bad in ("community", "community=vm", "friends=runc"):
        with pytest.raises(ValueError, match="EULER_TRUST_MIN_ISOLATION"):
            tiers.parse_trust_min(bad)


def test_a_lender_may_require_more_than_the_trust_level_never_less():
    table = tiers.parse_trust_min("")
    assert tiers.node_minimum("platform", "sandbox", table) == "sandbox"
    assert tiers.node_minimum("community", "runc", table) == "sandbox"
    assert tiers.node_minimum("platform", "", table) == "runc"


# --- the filter and the pending reason ---------------------------------------------------------------------
def test_a_community_job_runs_on_a_community_node_with_runsc_under_runsc():
    n = community(1, runtimes=(RUNC, RUNSC))
    plan = policy.place([job(1, networked=False)], [n], now=0)
    assert [p.node_id for p in plan.placements] == [1]
    assert tiers.choose(n.runtimes, sandbox=True, networked=False) == "runsc"


def test_a_community_node_without_a_sandboxed_runtime_leaves_the_job_queued_saying_why():
    plan = policy.place([job(1, networked=False)], [community(1, runtimes=(RUNC,)), community(2)], now=0)
    assert plan.placements == ()
    assert plan.pending[1] == (
        "no node with a sandboxed runtime in your pool: 2 lack a sandboxed runtime "
        "(the job, the node's trust level or its lender requires one)"
    )


def test_a_networked_job_needing_a_sandbox_waits_for_a_sandbox_that_runs_networks():
    plan = policy.place([job(1), job(2)], [community(1, runtimes=(RUNC, RUNSC))], now=0)
    assert [p.job_id for p in plan.placements] == []
    assert plan.pending[1].startswith("no node with a sandboxed runtime in your pool: 1 sandbox only network")
    plan = policy.place([job(1)], [community(1, runtimes=(RUNC, RUNSC_NET))], now=0)
    assert [p.node_id for p in plan.placements] == [1]


def test_platform_nodes_still_run_runc_by_default_and_a_sandbox_when_the_job_asks():
    n = node(1, runtimes=(RUNC, RUNSC))
    assert [p.node_id for p in policy.place([job(1)], [n], now=0).placements] == [1]
    assert tiers.choose(n.runtimes, sandbox=False, networked=True) == "runc"
    asks = job(2, isolation="sandbox", networked=False)
    assert [p.node_id for p in policy.place([asks], [n], now=0).placements] == [1]
    assert tiers.choose(n.runtimes, sandbox=True, networked=False) == "runsc"


def test_a_job_asking_for_a_sandbox_skips_nodes_without_one_anywhere():
    plan = policy.place([job(1, isolation="sandbox", networked=False)], [node(1), node(2, runtimes=(RUNC,))], now=0)
    assert plan.placements == () and plan.pending[1].startswith("no node with a sandboxed runtime in your pool")


def test_a_node_from_an_older_agent_runs_the_engines_default_for_jobs_that_need_no_sandbox():
    assert tiers.reject((), sandbox=False, networked=True) is None
    assert tiers.reject((), sandbox=True, networked=False) == "isolation"
    assert tiers.choose((), sandbox=False, networked=True) == ""


def test_capacity_reasons_keep_the_usual_wording_beside_a_missing_sandbox():
    nodes = [community(1), node(2, cpu_milli=500)]
    reason = policy.place([job(1, networked=False)], nodes, now=0).pending[1]
    assert reason.startswith("no node fits: ") and "lack a sandboxed runtime" in reason


# --- on the database: the attempt carries the runtime; runtimes pinned at approval -------------------------
RUNTIMES = [
    {"name": "runc", "sandbox": False, "networks": ["none", "default"], "default": True},
    {"name": "runsc", "sandbox": True, "networks": ["none"], "default": False},
]


@pytest.mark.django_db
def test_the_attempt_and_assignment_carry_the_runtime_the_scheduler_chose(api, project, owner, enroll, heartbeat):  # noqa: F811
    from jobs import node_hooks
    from jobs.scheduling import cycle

    _, secret = services.enrollment_token_create(project=project, by=owner, trust="community")
    n, cred = enroll(secret, name="lender-1", resources=_res(RUNTIMES))
    services.node_approve(node=n, trust="community", public_pool=True)
    r = api.post("/api/v1/jobs", seed_body(network="none"), format="json")
    networked = api.post("/api/v1/jobs", seed_body(), format="json").json()["id"]
    cycle.one_pass()
    attempt = Attempt.objects.get(job_id=r.json()["id"])
    assert (attempt.runtime, attempt.isolation) == ("runsc", "sandbox")
    (assignment,) = node_hooks.poll_provider(n)[0]
    assert (assignment.runtime, assignment.isolation) == ("runsc", "sandbox")
    assert Job.objects.get(pk=networked).pending_reason.startswith("no node with a sandboxed runtime in your pool")
    shown = api.get(f"/api/v1/jobs/{attempt.job_id}").json()
    assert shown["isolation"] == "default" and shown["attempts"][0]["runtime"] == "runsc"


@pytest.mark.django_db
def test_a_job_asks_for_a_sandbox_and_a_bad_value_is_a_clear_400(api):
    assert api.post("/api/v1/jobs", seed_body(isolation="sandbox"), format="json").json()["isolation"] == "sandbox"
    r = api.post("/api/v1/jobs", seed_body(isolation="vm"), format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_isolation"


@pytest.mark.django_db
def test_a_runtime_that_appears_after_approval_waits_for_the_operator(project, owner, enroll, heartbeat, api):  # noqa: F811
    _, secret = services.enrollment_token_create(project=project, by=owner)
    n, cred = enroll(secret, name="lender-2", resources=_res(RUNTIMES[:1]))
    services.node_approve(node=n)
    assert heartbeat(cred, runtimes=RUNTIMES).status_code == 200
    n.refresh_from_db()
    assert [r["name"] for r in n.runtimes] == ["runc"] and n.pending_capacity == {"runtimes": RUNTIMES}
    shown = api.get(f"/api/v1/nodes/{n.pk}").json()
    assert [r["name"] for r in shown["runtimes"]] == ["runc"] and shown["pending_capacity"]["runtimes"] == RUNTIMES
    n = services.node_capacity_approve(node=n)
    assert [r["name"] for r in n.runtimes] == ["runc", "runsc"] and n.approved_runtimes == RUNTIMES
    assert heartbeat(cred, runtimes=RUNTIMES[:1]).status_code == 200  # a runtime gone is gone at once
    n.refresh_from_db()
    assert [r["name"] for r in n.runtimes] == ["runc"] and n.pending_capacity == {}


def _res(runtimes) -> dict:
    return resources(runtimes=runtimes)
