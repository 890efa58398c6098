"""Checkpoints end to end (issue 36): real agents, real containers. A counter job writes step N to /ckpt/step each
second (each 0.2 s once restored) with interval_seconds 5; its node agent and container are killed with SIGKILL mid-run; the job finishes on
a second node from the last committed checkpoint, and the final count proves what was lost. A cancel takes a last
checkpoint of the stopped container's files; a directory of 100,000 files is refused, with the reason on the job,
and does not hold the stop. A reclaim and a preemption resume from the stop's checkpoint: no step lost."""

from __future__ import annotations

import re

import docker
import pytest

from tests.e2e.test_jobs import FAST, TRAP, Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

STEPS = 60  # long enough that a loaded machine still kills it mid-run, after two checkpoints
INTERVAL = 5
# A first attempt steps once a second (the checkpoints and the stops fall mid-run); one restored from a checkpoint
# (n > 0) runs its remaining steps five times as fast: what it proves is where it began and that no step is missing.
COUNTER = (
    "mkdir -p /ckpt; n=$(cat /ckpt/step 2>/dev/null || echo 0); echo start $n; pause=1; [ $n -gt 0 ] && pause=0.2; "
    f"while [ $n -lt {STEPS} ]; do n=$((n+1)); echo $n > /ckpt/step.new; mv /ckpt/step.new /ckpt/step; "
    "echo step $n; sleep $pause; done; echo done $n"
)


@pytest.fixture
def euler(platform_factory, project, docker_engine):
    e = Euler(platform_factory(env=FAST), project)
    yield e
    e.cleanup()


def checkpoints(euler, job_id: int) -> list[dict]:
    r = euler.http.get(f"jobs/{job_id}/checkpoints")
    assert r.status_code == 200, r.text
    return r.json()["checkpoints"]


def steps(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"^step (\d+)$", text, re.M)]


def test_a_job_killed_with_its_node_resumes_on_another_node_from_its_last_checkpoint(euler):
    first = euler.node()
    job = euler.submit(["sh", "-c", COUNTER], max_retries=1, retry_on=["lost"], timeout_seconds=300,
                       checkpoint={"path": "/ckpt", "interval_seconds": INTERVAL, "keep_last": 20})  # fmt: skip
    attempt_id = euler.wait_state(job["id"], {"running"})["attempts"][0]["id"]
    # Killed just after its second periodic checkpoint is committed (the event, not a time).
    euler.platform.wait_for(lambda: len(checkpoints(euler, job["id"])) >= 2, "two periodic checkpoints", timeout=90)
    (cid,) = euler.containers(attempt_id)
    euler.platform.kill_agent(first)
    docker.from_env().api.kill(cid, signal="SIGKILL")
    before = checkpoints(euler, job["id"])
    second = euler.node()
    done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=180)
    assert done["state"] == "succeeded", done
    assert [(a["node"], a["state"]) for a in done["attempts"]] == [(first, "lost"), (second, "succeeded")]
    ran_first = steps(euler.logs(job["id"], attempt=1))
    log = euler.logs(job["id"], attempt=2)
    restored = int(re.search(r"^start (\d+)$", log, re.M).group(1))
    # The second attempt began at the latest checkpoint committed before the kill, never at a partial one.
    assert before[0]["attempt"] == 1 and restored >= 1
    assert steps(log) == list(range(restored + 1, STEPS + 1)) and f"done {STEPS}" in log
    # The killed node's last lines may never have been shipped: its log is a lower bound of the steps it ran.
    lost = max(max(ran_first), restored) - restored
    print(f"checkpoint resume: first attempt reached step {max(ran_first)}, restored at {restored}, lost {lost}")
    assert lost <= INTERVAL  # at most one interval of steps
    after = checkpoints(euler, job["id"])
    assert after[0]["attempt"] == 2 and after[0]["reason"] == "stop"
    tar = euler.http.get(f"jobs/{job['id']}/checkpoints/latest/download")
    assert tar.status_code == 200 and f"{STEPS}\n".encode() in tar.content


def test_a_cancel_takes_a_last_checkpoint_of_the_stopped_containers_files(euler):
    euler.node()
    job = euler.submit(["sh", "-c", TRAP + "mkdir -p /ckpt; echo 41 > /ckpt/step; echo ready; sleep 60 & wait"],
                       checkpoint={"path": "/ckpt", "interval_seconds": 3600})  # fmt: skip
    euler.wait_state(job["id"], {"running"})
    euler.platform.wait_for(lambda: "ready" in euler.logs(job["id"]), "the job wrote its step")
    assert euler.http.post(f"jobs/{job['id']}/cancel").status_code in (200, 202)
    euler.wait_state(job["id"], {"cancelled"})
    (last,) = euler.platform.wait_for(lambda: checkpoints(euler, job["id"]), "the stop's checkpoint")
    assert (last["reason"], last["files"], last["size"]) == ("stop", 1, 3)


def test_a_checkpoint_of_100000_files_is_refused_with_the_reason_and_does_not_hold_the_stop(euler):
    euler.node()
    # Made aside and moved in at once: no periodic checkpoint sees a part of them.
    make = "mkdir -p /tmp/many && cd /tmp/many && seq 1 100000 | xargs touch && mv /tmp/many /ckpt && echo made; "
    job = euler.submit(["sh", "-c", TRAP + make + "sleep 120 & wait"],
                       checkpoint={"path": "/ckpt", "interval_seconds": INTERVAL}, timeout_seconds=300)  # fmt: skip
    euler.wait_state(job["id"], {"running"})
    euler.platform.wait_for(lambda: "made" in euler.logs(job["id"]), "the job made its files", timeout=120)
    assert euler.http.post(f"jobs/{job['id']}/cancel").status_code in (200, 202)
    # The attempt ends once the node reported it: after its stop's checkpoint was refused, not held by it.
    done = euler.platform.wait_for(
        lambda: (j := euler.job(job["id"]))["attempts"][0]["state"] == "cancelled" and j,
        "the attempt ends",
        timeout=120,
    )
    events = [e["message"] for e in done["events"] if e["reason"] == "checkpoint_refused"]
    assert "checkpoint not taken: stop: more than 10000 files" in events, events
    listing = euler.http.get(f"jobs/{job['id']}/checkpoints").json()
    assert "more than 10000 files" in listing["last_refusal"]["message"]
    assert listing["checkpoints"] == []


# The counter of the two tests below: fewer steps (it is stopped after its first checkpoint, then finishes), and no
# trap: SIGTERM leaves it counting through its grace, and the stop's checkpoint, taken once the container stopped,
# holds the last step it wrote.
SHORT = 30
SHORT_COUNTER = COUNTER.replace(f"-lt {STEPS}", f"-lt {SHORT}")


def resumed_from_the_stop(euler, job_id: int) -> tuple[int, int]:
    """(last step the first attempt logged, step the second began at), once checked: the second began at the
    stop's checkpoint and ran to the end."""
    ran_first = steps(euler.logs(job_id, attempt=1))
    log = euler.logs(job_id, attempt=2)
    restored = int(re.search(r"^start (\d+)$", log, re.M).group(1))
    assert steps(log) == list(range(restored + 1, SHORT + 1)) and f"done {SHORT}" in log
    stops = [c for c in checkpoints(euler, job_id) if c["attempt"] == 1 and c["reason"] == "stop"]
    assert stops, checkpoints(euler, job_id)
    # No step lost beyond the stop's checkpoint: the second attempt began at (or after) the last step the first
    # logged (the file is written before its line, so it may be one ahead of the log, never behind it).
    assert restored >= max(ran_first), (ran_first, restored)
    return max(ran_first), restored


def test_a_reclaimed_job_resumes_elsewhere_from_its_stop_checkpoint_and_loses_no_step(euler):
    from tests.e2e.test_stops import euler_node

    first = euler.node()
    job = euler.submit(["sh", "-c", SHORT_COUNTER], max_retries=0, timeout_seconds=300, stop_grace_seconds=2,
                       checkpoint={"path": "/ckpt", "interval_seconds": INTERVAL, "keep_last": 20})  # fmt: skip
    euler.wait_state(job["id"], {"running"})
    euler.platform.wait_for(lambda: checkpoints(euler, job["id"]), "a periodic checkpoint", timeout=90)
    second = euler.node()
    reclaimed = euler_node(euler.platform, first, "reclaim", "--grace", "2", "--json")
    assert reclaimed.returncode == 0, reclaimed.stderr
    done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=180)
    assert done["state"] == "succeeded", done
    assert [(a["node"], a["state"]) for a in done["attempts"]] == [(first, "reclaimed"), (second, "succeeded")]
    assert done["retries_used"] == 0
    logged, restored = resumed_from_the_stop(euler, job["id"])
    print(f"reclaim resume: first attempt logged step {logged}, the second began at {restored}")


def test_a_preempted_job_resumes_from_its_stop_checkpoint_after_the_higher_class_job_and_loses_no_step(
    platform_factory, project, other_project, docker_engine
):
    from tests.e2e.test_preemption import NODE, two_classes

    high, low = two_classes(platform_factory, project, other_project)
    platform = high.platform
    try:
        node = high.node(env=NODE)
        victim = low.submit(["sh", "-c", SHORT_COUNTER], cpu_milli=1000, max_retries=0, timeout_seconds=300,
                            stop_grace_seconds=2, checkpoint={"path": "/ckpt", "interval_seconds": INTERVAL,
                                                              "keep_last": 20})["id"]  # fmt: skip
        low.wait_state(victim, {"running"})
        platform.wait_for(lambda: checkpoints(low, victim), "a periodic checkpoint", timeout=90)
        urgent_job = high.submit(["sh", "-c", "echo urgent done"], cpu_milli=1000, priority_class="urgent")
        assert high.wait_state(urgent_job["id"], {"succeeded", "failed"}, timeout=120)["state"] == "succeeded"
        done = low.wait_state(victim, {"succeeded", "failed", "lost"}, timeout=180)
        assert done["state"] == "succeeded", done
        assert [(a["node"], a["state"]) for a in done["attempts"]] == [(node, "preempted"), (node, "succeeded")]
        assert done["retries_used"] == 0
        logged, restored = resumed_from_the_stop(low, victim)
        print(f"preemption resume: first attempt logged step {logged}, the second began at {restored}")
    finally:
        high.cleanup()
