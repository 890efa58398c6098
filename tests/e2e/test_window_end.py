"""A lender's availability window ends, end to end (issue 37): web, worker, beat and real `./euler-node` agents.

A node whose lender's window closes in 30 s (to the next whole minute: 30 to 90 s) gets no 10-minute job without a
checkpoint (its pending reason says why); it gets a 10 s job, which succeeds, and a checkpointing counter job, which
is stopped before the close with its grace and a checkpoint, and requeued without spending a retry (attempt
`preempted`, reason `window_closed`). After the close the node takes nothing; a second node with no window then
runs the job on from its checkpoint. The close is the real one: the pass runs every second (EULER_WINDOW_CHECK_INTERVAL)
but the window's seconds are not scaled: windows are whole minutes, so the test waits 30 to 90 s for the close."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.e2e.test_jobs import FAST, Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

GRACE = 10
# The close is the first whole minute at least LEAD seconds away: time for the 10-minute job's pending reason and the
# SHORT-second job to run before the close (it is placed only while it ends before it), and for the counter job to
# start and be stopped GRACE seconds before it.
LEAD, SHORT = 30, 10
# A first attempt counts until it is stopped (saying the word in its stop file); one restored from a checkpoint counts 3 more steps and exits 0.
COUNTER = (
    "trap 'echo stopped: $(cat /run/euler/stop); exit 143' TERM; "
    "mkdir -p /ckpt; n=$(cat /ckpt/step 2>/dev/null || echo 0); echo start $n; "
    "if [ $n -gt 0 ]; then end=$((n+3)); else end=100000; fi; "
    "while [ $n -lt $end ]; do n=$((n+1)); echo $n > /ckpt/step.new; mv /ckpt/step.new /ckpt/step; "
    "echo step $n; sleep 1 & wait $!; done; echo done $n"
)


@pytest.fixture
def euler(platform_factory, project, docker_engine):
    e = Euler(platform_factory(env=FAST | {"EULER_WINDOW_CHECK_INTERVAL": "1"}), project)
    yield e
    e.cleanup()


def steps(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"^step (\d+)$", text, re.M)]


def test_a_window_closing_in_30_to_90_s_takes_short_and_checkpointing_jobs_stops_them_at_its_end_and_then_nothing(
    euler,
):
    from lending.terms import terms_set
    from nodes.models import Node

    lent = euler.node()
    now = timezone.now()
    opened, closes = now - timedelta(hours=1), now + timedelta(seconds=LEAD)
    closes = closes.replace(second=0, microsecond=0) + timedelta(minutes=1)  # HH:MM: the next whole minute
    window = {"days": sorted({opened.strftime("%a").lower(), closes.strftime("%a").lower()}),
              "start": opened.strftime("%H:%M"), "end": closes.strftime("%H:%M")}  # fmt: skip
    terms_set(node=Node.objects.get(name=lent), data={"timezone": "UTC", "windows": [window]}, by=None)

    long = euler.submit(["sleep", "600"], timeout_seconds=600)
    euler.platform.wait_for(
        lambda: "close their availability window before the job's timeout" in euler.job(long["id"])["pending_reason"],
        "the 10-minute job waits, saying why",
    )
    short = euler.submit(["sh", "-c", "echo short"], timeout_seconds=SHORT)
    done = euler.wait_state(short["id"], {"succeeded", "failed", "lost"})
    assert (done["state"], done["attempts"][0]["node"]) == ("succeeded", lent)

    job = euler.submit(["sh", "-c", COUNTER], timeout_seconds=600, stop_grace_seconds=GRACE, max_retries=0,
                       checkpoint={"path": "/ckpt", "interval_seconds": 5})  # fmt: skip
    assert euler.wait_state(job["id"], {"running"})["attempts"][0]["node"] == lent
    wait = (closes - timezone.now()).total_seconds() + 60
    stopped = euler.platform.wait_for(
        lambda: (j := euler.job(job["id"]))["attempts"][0]["state"] not in ("assigned", "running") and j,
        "the window's end stops the attempt",
        timeout=wait,
    )
    first = stopped["attempts"][0]
    assert (first["state"], first["reason"], first["stop_reason"]) == ("preempted", "window_closed", "window_closed")
    assert stopped["retries_used"] == 0
    asked = [e["message"] for e in stopped["events"] if e["reason"] == "stop_requested"]
    assert len(asked) == 1 and "window_closed" in asked[0] and f"{GRACE} s grace" in asked[0]
    assert re.search(r"closes in \d+ s", asked[0]), asked  # asked before the close, not after
    assert any(e["reason"] == "window_closed" and "retry budget untouched" in e["message"] for e in stopped["events"])
    taken = [c for c in euler.http.get(f"jobs/{job['id']}/checkpoints").json()["checkpoints"] if c["attempt"] == 1]
    assert taken and taken[0]["reason"] == "stop", taken  # the latest first: the one taken at the stop

    # After the close nothing is placed there: both jobs wait, saying why.
    outside = "1 are outside their lenders' availability windows"
    for waiting in (job, long):
        euler.platform.wait_for(lambda w=waiting: outside in euler.job(w["id"])["pending_reason"], "outside the window")
    assert euler.http.post(f"jobs/{long['id']}/cancel").status_code in (200, 202)
    euler.wait_state(long["id"], {"cancelled"})

    # A node with no window runs the job on from the checkpoint taken at the stop.
    second = euler.node()
    done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=120)
    assert done["state"] == "succeeded", done
    assert [(a["node"], a["state"]) for a in done["attempts"]] == [(lent, "preempted"), (second, "succeeded")]
    first_log = euler.logs(job["id"], attempt=1)
    assert "stopped: window" in first_log  # the word in its /run/euler/stop
    ran = steps(first_log)
    log = euler.logs(job["id"], attempt=2)
    restored = int(re.search(r"^start (\d+)$", log, re.M).group(1))
    assert max(ran) <= restored <= max(ran) + 1  # the stop's checkpoint holds the last step (or one not yet printed)
    assert steps(log) == [restored + 1, restored + 2, restored + 3] and f"done {restored + 3}" in log
    print(f"window end: stopped at step {max(ran)}, resumed from {restored} on {second}: {asked[0]}")
