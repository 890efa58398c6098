"""Job arrays and dependencies over the API: submit, parallelism, counts, cancel and retry, the cascade."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs import attempts
from jobs.models import Attempt, Job, JobArray
from nodeagent import protocol

from .conftest import seed_body

pytestmark = pytest.mark.django_db


def submit_array(api, count, parallelism=None, **over):
    array = {"count": count} if parallelism is None else {"count": count, "parallelism": parallelism}
    r = api.post("/api/v1/jobs", seed_body(array=array, **over), format="json")
    assert r.status_code == 201, r.json()
    return r.json()


def finish(job_id: int, exit_code: int = 0) -> None:
    """The job's node reports its current attempt ended with `exit_code`."""
    attempt = Attempt.objects.select_related("node").get(pk=Job.objects.get(pk=job_id).current_attempt_id)
    report = protocol.AttemptReport(state="ended", exit_code=exit_code, reason="exited")
    attempts.attempt_report(node=attempt.node, attempt_id=attempt.pk, report=report)


def states(array_id) -> dict[int, str]:
    return dict(Job.objects.filter(array_id=array_id).values_list("array_index", "state"))


def test_an_array_is_one_request_with_n_tasks_each_a_job(api):
    body = submit_array(api, 20)
    assert body["count"] == 20 and body["parallelism"] is None
    assert body["counts"]["queued"] == 20 and body["state"] == "queued"
    tasks = Job.objects.filter(array_id=body["id"]).order_by("array_index")
    assert [t.array_index for t in tasks] == list(range(20))
    assert all(t.name == "hello" and t.image == "euler-test/busybox" for t in tasks)
    assert all(t.events.count() == 1 for t in tasks[:3])


def test_parallelism_queues_only_that_many_and_the_rest_wait_off_the_scheduler(api, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    body = submit_array(api, 12, parallelism=3)
    assert body["counts"]["queued"] == 3 and body["counts"]["waiting"] == 9
    waiting = Job.objects.filter(array_id=body["id"], state="waiting").first()
    assert f"array {body['id']} runs at most 3" in waiting.pending_reason
    assert schedule().placed == 3
    assert schedule().placed == 0  # the nine waiting tasks are no candidates
    assert sorted(i for i, s in states(body["id"]).items() if s == "assigned") == [0, 1, 2]


def test_an_ended_task_gives_its_slot_to_the_next_index(api, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    body = submit_array(api, 5, parallelism=2)
    schedule()
    first = Job.objects.get(array_id=body["id"], array_index=0)
    finish(first.pk, 0)
    assert states(body["id"]) == {0: "succeeded", 1: "assigned", 2: "queued", 3: "waiting", 4: "waiting"}
    schedule()
    for index in (1, 2):
        finish(Job.objects.get(array_id=body["id"], array_index=index).pk, 1)
    got = api.get(f"/api/v1/arrays/{body['id']}").json()
    assert got["counts"]["failed"] == 2 and got["counts"]["queued"] == 2 and got["counts"]["succeeded"] == 1


def test_tasks_get_their_index_and_count_in_the_assignment_on_any_node(api, make_node, schedule):
    from jobs import node_hooks

    # A community node runs jobs under its sandboxed runtime (gVisor, network "none" on this engine).
    runtimes = [
        {"name": "runc", "sandbox": False, "networks": ["none", "default"], "default": True},
        {"name": "runsc", "sandbox": True, "networks": ["none"], "default": False},
    ]
    node = make_node(trust="community", public_pool=True, cpu_milli=64000, memory_bytes=64 << 30, runtimes=runtimes)
    submit_array(api, 3, network="none")
    schedule()
    assignments, _ = node_hooks.poll_provider(node)
    assert sorted((a.array_index, a.array_count) for a in assignments) == [(0, 3), (1, 3), (2, 3)]
    assert all(a.env == {} for a in assignments)


def test_cancel_the_whole_array_ends_every_task_and_stops_running_ones(api, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    body = submit_array(api, 6, parallelism=2)
    schedule()
    r = api.post(f"/api/v1/arrays/{body['id']}/cancel", {}, format="json")
    assert r.status_code == 200 and r.json()["counts"]["cancelled"] == 6 and r.json()["state"] == "cancelled"
    assert Attempt.objects.filter(job__array_id=body["id"], stop_reason="cancelled").count() == 2


def test_cancel_and_retry_one_index(api, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    body = submit_array(api, 4, parallelism=2)
    r = api.post(f"/api/v1/arrays/{body['id']}/cancel", {"index": 0}, format="json")
    assert r.status_code == 200
    assert states(body["id"]) == {0: "cancelled", 1: "queued", 2: "queued", 3: "waiting"}
    r = api.post(f"/api/v1/arrays/{body['id']}/retry", {"index": 0}, format="json")
    assert r.status_code == 200
    assert states(body["id"])[0] == "waiting"  # the array runs its parallelism already
    assert api.post(f"/api/v1/arrays/{body['id']}/retry", {"index": 1}, format="json").json()["code"] == (
        "invalid_transition"
    )
    assert api.post(f"/api/v1/arrays/{body['id']}/cancel", {"index": 9}, format="json").status_code == 404


def test_retry_the_whole_array_requeues_only_what_did_not_succeed(api, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    body = submit_array(api, 3)
    schedule()
    ids = dict(Job.objects.filter(array_id=body["id"]).values_list("array_index", "pk"))
    finish(ids[0], 0)
    finish(ids[1], 2)
    finish(ids[2], 3)
    got = api.post(f"/api/v1/arrays/{body['id']}/retry", {}, format="json").json()
    assert got["counts"] == {**got["counts"], "succeeded": 1, "queued": 2}
    assert Job.objects.get(pk=ids[1]).retries_used == 0


def test_a_task_can_be_cancelled_and_retried_as_a_job(api):
    body = submit_array(api, 3, parallelism=1)
    task = Job.objects.get(array_id=body["id"], array_index=0)
    assert api.post(f"/api/v1/jobs/{task.pk}/cancel").json()["state"] == "cancelled"
    assert states(body["id"]) == {0: "cancelled", 1: "queued", 2: "waiting"}
    assert api.post(f"/api/v1/jobs/{task.pk}/retry").json()["state"] == "waiting"


def test_the_job_list_leaves_tasks_out_unless_asked(api, submit):
    submit()
    body = submit_array(api, 5)
    assert api.get("/api/v1/jobs").json()["count"] == 1
    tasks = api.get(f"/api/v1/jobs?array={body['id']}").json()
    assert tasks["count"] == 5 and tasks["results"][0]["array"] == body["id"]
    listed = api.get(f"/api/v1/arrays/{body['id']}/tasks?state=queued").json()
    assert [t["array_index"] for t in listed["results"]] == [0, 1, 2, 3, 4]
    assert api.get("/api/v1/arrays").json()["results"][0]["counts"]["queued"] == 5


@pytest.mark.parametrize(
    ("array", "code"),
    [({"count": 0}, "invalid_array"), ({"count": 10_001}, "invalid_array"), ({"parallelism": 2}, "invalid_array"),
     ({"count": 3, "parallelism": 0}, "invalid_array"), ({"count": 3, "colour": 1}, "invalid_array"), (5, "invalid_array")],
)  # fmt: skip
def test_bad_arrays_are_refused_with_a_code(api, array, code):
    r = api.post("/api/v1/jobs", seed_body(array=array), format="json")
    assert r.status_code == 400 and r.json()["code"] == code


def test_the_max_count_is_a_setting(api, settings):
    settings.EULER_JOB_ARRAY_MAX_COUNT = 4
    assert api.post("/api/v1/jobs", seed_body(array={"count": 5}), format="json").status_code == 400
    assert api.post("/api/v1/jobs", seed_body(array={"count": 4}), format="json").status_code == 201


def test_another_projects_array_is_404(api, other_api):
    body = submit_array(api, 2)
    assert other_api.get(f"/api/v1/arrays/{body['id']}").status_code == 404
    assert other_api.post(f"/api/v1/arrays/{body['id']}/cancel", {}, format="json").status_code == 404
    assert other_api.get(f"/api/v1/arrays/{body['id']}/tasks").status_code == 404


# Dependencies


def test_a_dependent_waits_with_a_reason_then_runs_when_its_dependency_succeeds(api, submit, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    a = submit()
    b = submit(depends_on=[{"job": a["id"]}])
    assert b["state"] == "waiting" and b["pending_reason"] == f"waiting for job {a['id']} to succeed"
    assert b["depends_on"] == [{"job": a["id"], "array": None, "condition": "succeeded", "state": "pending"}]
    assert schedule().placed == 1
    finish(a["id"], 0)
    got = api.get(f"/api/v1/jobs/{b['id']}").json()
    assert got["state"] == "queued" and got["depends_on"][0]["state"] == "met"
    assert got["events"][-1]["reason"] == "dependencies_met"


def test_a_failed_chain_ends_cancelled_dependency_failed_at_once_and_transitively(api, submit, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    a = submit()
    b = submit(depends_on=[{"job": a["id"], "condition": "succeeded"}])
    c = submit(depends_on=[{"job": b["id"], "condition": "ended"}])
    d = submit(depends_on=[{"job": a["id"], "condition": "ended"}])
    schedule()
    finish(a["id"], 1)  # one report, one transaction: B and C end in it
    for job in (b, c):  # C waits for B to end, but B never ran: the failure travels down the chain
        row = Job.objects.get(pk=job["id"])
        assert (row.state, row.reason) == ("cancelled", "dependency_failed")
    assert Job.objects.get(pk=d["id"]).state == "queued"  # `ended` holds for a failed A


def test_ended_holds_after_a_cancel_and_succeeded_does_not(api, submit):
    a = submit()
    b = submit(depends_on=[{"job": a["id"], "condition": "ended"}])
    c = submit(depends_on=[{"job": a["id"]}])
    api.post(f"/api/v1/jobs/{a['id']}/cancel")
    assert Job.objects.get(pk=b["id"]).state == "queued"
    assert Job.objects.get(pk=c["id"]).reason == "dependency_failed"
    assert api.post(f"/api/v1/jobs/{c['id']}/retry").json()["code"] == "dependency_failed"


def test_a_dependency_that_already_ended_is_settled_at_submit(api, submit):
    a = submit()
    api.post(f"/api/v1/jobs/{a['id']}/cancel")
    assert submit(depends_on=[{"job": a["id"], "condition": "ended"}])["state"] == "queued"
    late = submit(depends_on=[{"job": a["id"]}])
    assert (late["state"], late["reason"]) == ("cancelled", "dependency_failed")


def test_a_job_waits_for_a_whole_array(api, submit, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    arr = submit_array(api, 3)
    after = submit(depends_on=[{"array": arr["id"]}])
    assert after["pending_reason"] == f"waiting for array {arr['id']} to succeed"
    schedule()
    ids = list(Job.objects.filter(array_id=arr["id"]).order_by("array_index").values_list("pk", flat=True))
    finish(ids[0], 0)
    finish(ids[1], 0)
    assert Job.objects.get(pk=after["id"]).state == "waiting"
    finish(ids[2], 0)
    assert Job.objects.get(pk=after["id"]).state == "queued"


def test_one_failed_task_fails_an_array_dependency_at_once(api, submit, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    arr = submit_array(api, 3)
    after = submit(depends_on=[{"array": arr["id"]}])
    schedule()
    finish(Job.objects.get(array_id=arr["id"], array_index=1).pk, 7)
    assert Job.objects.get(pk=after["id"]).reason == "dependency_failed"


def test_an_array_waits_for_a_job_then_releases_only_its_parallelism(api, submit, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    a = submit()
    arr = submit_array(api, 6, parallelism=2, depends_on=[{"job": a["id"]}])
    assert arr["held"] is True and arr["counts"]["waiting"] == 6 and arr["state"] == "waiting"
    assert arr["pending_reason"] == f"waiting for job {a['id']} to succeed"
    schedule()
    finish(a["id"], 0)
    assert states(arr["id"]) == {0: "queued", 1: "queued", 2: "waiting", 3: "waiting", 4: "waiting", 5: "waiting"}
    assert JobArray.objects.get(pk=arr["id"]).held is False


def test_an_array_whose_dependency_fails_is_cancelled_whole_and_so_is_what_follows(api, submit, make_node, schedule):
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    a = submit()
    arr = submit_array(api, 4, depends_on=[{"job": a["id"]}])
    after = submit(depends_on=[{"array": arr["id"], "condition": "ended"}])
    schedule()
    finish(a["id"], 1)
    assert set(states(arr["id"]).values()) == {"cancelled"}
    assert Job.objects.get(pk=after["id"]).reason == "dependency_failed"  # the array never ran


def test_another_projects_job_is_404_and_an_unknown_one_too(api, other_api, submit):
    theirs = other_api.post("/api/v1/jobs", seed_body(), format="json").json()
    r = api.post("/api/v1/jobs", seed_body(depends_on=[{"job": theirs["id"]}]), format="json")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = api.post("/api/v1/jobs", seed_body(depends_on=[{"array": 999999}]), format="json")
    assert r.status_code == 404
    assert Job.objects.filter(project__in=[]).count() == 0


def test_a_self_dependency_is_refused_as_a_cycle(api, submit):
    a = submit()
    r = api.post("/api/v1/jobs", seed_body(depends_on=[{"job": a["id"] + 1}]), format="json")  # its own id
    assert r.status_code == 400 and r.json()["code"] == "dependency_cycle"
    assert not Job.objects.filter(pk=a["id"] + 1).exists()  # nothing half-written


def test_an_array_depending_on_its_own_task_is_refused_as_a_cycle(api, submit):
    a = submit()
    r = api.post("/api/v1/jobs", seed_body(array={"count": 2}, depends_on=[{"array": 0 + JobArray.objects.count() + 1}]),
                 format="json")  # fmt: skip
    assert r.status_code in (400, 404)
    assert JobArray.objects.count() == 0 and Job.objects.count() == 1 and a


@pytest.mark.parametrize(
    "deps",
    [
        "x", [{"job": "1"}], [{"job": 1, "array": 2}], [{"job": 1, "condition": "afterok"}], [{}],
        [{"job": 1, "colour": 1}], [{"job": i} for i in range(1, 40)],
    ],
)  # fmt: skip
def test_bad_depends_on_is_refused_with_a_code(api, deps):
    r = api.post("/api/v1/jobs", seed_body(depends_on=deps), format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_depends_on"


def test_dependent_of_a_queued_job_cancelled_by_the_user_is_cancelled_too(api, submit):
    a = submit()
    b = submit(depends_on=[{"job": a["id"]}])
    api.post(f"/api/v1/jobs/{b['id']}/cancel")
    assert Job.objects.get(pk=b["id"]).state == "cancelled"
    assert Job.objects.get(pk=a["id"]).state == "queued"
    assert timezone.now()


def test_the_sweep_fills_array_slots_left_free(api):
    from jobs import arrays

    body = submit_array(api, 5, parallelism=2)
    Job.objects.filter(array_id=body["id"], array_index=0).update(state="succeeded")  # as if a release was missed
    assert arrays.refill() == 1
    assert states(body["id"]) == {0: "succeeded", 1: "queued", 2: "queued", 3: "waiting", 4: "waiting"}
    assert arrays.refill() == 0


def test_the_concurrency_quota_counts_each_running_task(api, project, make_node, schedule):
    from quotas.models import Quota

    Quota.objects.filter(project=project).update(max_concurrent_jobs=2)
    make_node(cpu_milli=64000, memory_bytes=64 << 30)
    body = submit_array(api, 5)
    assert schedule().placed == 2
    waiting = Job.objects.filter(array_id=body["id"], state="queued").first()
    assert waiting.pending_reason.startswith("concurrency_quota")
