"""Job arrays and dependencies end to end: web, worker, beat and a real `./euler-node` running real containers.

The big array's size is EULER_E2E_ARRAY_COUNT (100 in the suite; the issue's 1,000 is run by hand:
`EULER_E2E_ARRAY_COUNT=1000 pytest tests/e2e/test_arrays.py -k every_index`)."""

from __future__ import annotations

import os
import time

import docker
import pytest

from nodeagent import protocol
from tests.e2e.test_jobs import FAST, TRAP, Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

COUNT = int(os.environ.get("EULER_E2E_ARRAY_COUNT", "100"))
SMALL = {"cpu_milli": 20, "memory_bytes": 16 * 1024 * 1024}


@pytest.fixture
def euler(platform_factory, project, docker_engine):
    e = Euler(platform_factory(env={**FAST, "EULER_JOB_ARRAY_MAX_COUNT": "10000"}), project)
    yield e
    e.cleanup()


def submit_array(euler: Euler, command: list[str], count: int, parallelism: int | None = None, **over) -> dict:
    array = {"count": count} | ({"parallelism": parallelism} if parallelism else {})
    body = {"name": "e2e-array", "image": "euler-test/busybox", "command": command, "gpu_count": 0,
            "timeout_seconds": 120, "array": array, **SMALL} | over  # fmt: skip
    r = euler.http.post("jobs", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def array(euler: Euler, array_id: int) -> dict:
    r = euler.http.get(f"arrays/{array_id}")
    assert r.status_code == 200, r.text
    return r.json()


def running_containers(euler: Euler) -> int:
    client = docker.from_env()
    return sum(
        len(client.api.containers(filters={"label": f"{protocol.LABEL_NODE}={name}", "status": "running"}))
        for name in euler.node_names
    )


@pytest.mark.timeout(300 + COUNT * 2)  # pytest-timeout's 300 s is for the suite's 100; 1,000 by hand takes longer
def test_every_index_runs_exactly_once_and_prints_itself(euler):
    from jobs import logstore
    from jobs.models import Attempt

    euler.node()
    started = time.monotonic()
    arr = submit_array(euler, ["sh", "-c", "echo $EULER_ARRAY_INDEX of $EULER_ARRAY_COUNT"], COUNT)
    done = euler.platform.wait_for(
        lambda: (a := array(euler, arr["id"]))["state"] in ("succeeded", "failed", "cancelled") and a,
        f"{COUNT} tasks end",
        timeout=120 + COUNT * 1.5,
        every=1,
    )
    took = time.monotonic() - started
    assert done["state"] == "succeeded" and done["counts"]["succeeded"] == COUNT, done["counts"]
    attempts = list(Attempt.objects.filter(job__array_id=arr["id"]).values_list("job__array_index", "pk"))
    assert sorted(i for i, _ in attempts) == list(range(COUNT))  # each task exactly one attempt
    printed = {index: logstore.full_text(attempt_id) for index, attempt_id in attempts}  # hot or compacted
    assert {printed[i] for i in range(COUNT)} == {f"{i} of {COUNT}\n" for i in range(COUNT)}
    print(f"\n{COUNT}-task array: submit to all succeeded in {took:.1f} s ({COUNT / took:.1f} tasks/s)")


def test_cancelling_an_array_midway_leaves_no_task_running(euler):
    euler.node()
    arr = submit_array(euler, ["sh", "-c", TRAP + "sleep 120 & wait"], 40, parallelism=6)
    euler.platform.wait_for(lambda: running_containers(euler) >= 3, "tasks are running", timeout=120)
    started = time.monotonic()
    r = euler.http.post(f"arrays/{arr['id']}/cancel", json={})
    assert r.status_code == 200, r.text
    assert r.json()["counts"]["cancelled"] == 40 and r.json()["state"] == "cancelled"
    euler.platform.wait_for(lambda: running_containers(euler) == 0, "no task container runs", timeout=60, every=0.05)
    took = time.monotonic() - started
    from jobs.models import Attempt
    from jobs.states import ATTEMPT_ACTIVE

    euler.platform.wait_for(
        lambda: not Attempt.objects.filter(job__array_id=arr["id"], state__in=ATTEMPT_ACTIVE).exists(),
        "every attempt ended",
    )
    print(f"\ncancel of a 40-task array with 6 running: no container running {took:.2f} s after the request")


def test_parallelism_five_never_has_more_than_five_running(euler):
    euler.node()
    arr = submit_array(euler, ["sh", "-c", "sleep 1"], 20, parallelism=5)
    most_api = most_docker = samples = 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        got = array(euler, arr["id"])
        c = got["counts"]
        most_api = max(most_api, c["running"] + c["assigned"] + c["queued"])
        most_docker = max(most_docker, running_containers(euler))
        samples += 1
        if got["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.1)
    assert got["state"] == "succeeded", got
    assert most_api <= 5 and most_docker <= 5, (most_api, most_docker)
    assert most_docker >= 2  # it did run tasks side by side
    print(f"\nparallelism 5: {samples} samples, at most {most_api} in a slot, {most_docker} containers running")


def test_a_failed_chain_cancels_b_and_c_in_the_same_pass_and_a_cycle_is_refused(euler):
    from jobs.models import Job

    euler.node()
    a = euler.submit(["sh", "-c", "exit 1"], max_retries=0)
    b = euler.submit(["echo", "b"], depends_on=[{"job": a["id"], "condition": "succeeded"}])
    c = euler.submit(["echo", "c"], depends_on=[{"job": b["id"], "condition": "ended"}])
    assert b["state"] == c["state"] == "waiting" and f"job {a['id']}" in b["pending_reason"]
    assert euler.wait_state(a["id"], {"succeeded", "failed"})["state"] == "failed"
    rows = {row.pk: row for row in Job.objects.filter(pk__in=[a["id"], b["id"], c["id"]])}
    for job in (b, c):
        assert (rows[job["id"]].state, rows[job["id"]].reason) == ("cancelled", "dependency_failed")
    # One transaction: A's end report ended B and C with A's own instant.
    assert rows[a["id"]].ended_at == rows[b["id"]].ended_at == rows[c["id"]].ended_at
    assert euler.job(c["id"])["attempts"] == []
    nxt = Job.objects.order_by("-pk").values_list("pk", flat=True).first() + 1
    r = euler.http.post("jobs", json={"name": "self", "image": "euler-test/busybox", "command": ["true"],
                                      "cpu_milli": 20, "memory_bytes": 16 << 20, "timeout_seconds": 10,
                                      "depends_on": [{"job": nxt}]})  # fmt: skip
    assert (r.status_code, r.json()["code"]) == (400, "dependency_cycle"), r.text
