"""A job's life on a node: placement, the poll, fenced reports, cancel, timeouts, lost nodes and retries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import attempts, node_hooks
from jobs.models import Attempt, Job
from nodeagent import protocol

pytestmark = pytest.mark.django_db


def report(node_client, credential, attempt_id, **body):
    path = "/node-api/v1/" + protocol.PATH_ATTEMPT_REPORT.format(attempt_id=attempt_id)
    return node_client(credential).post(path, body, format="json")


@pytest.fixture
def node_client():
    from rest_framework.test import APIClient

    def make(credential):
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {credential}")
        return c

    return make


@pytest.fixture
def placed(submit, make_node, credential_for, schedule):
    """A job placed on a platform node: (job id, attempt, node, credential)."""

    creds = {}

    def make(**over):
        make_node()
        job = submit(**over)
        assert schedule().placed == 1
        attempt = Attempt.objects.select_related("node").get(job_id=job["id"])
        node = attempt.node
        if node.pk not in creds:
            creds[node.pk] = credential_for(node)
        return job["id"], attempt, node, creds[node.pk]

    return make


def state_of(job_id) -> str:
    return Job.objects.get(pk=job_id).state


def test_a_pass_assigns_the_job_and_the_poll_hands_it_over_once(placed):
    job_id, attempt, node, _ = placed(env={"SECRET": "v"})
    assert state_of(job_id) == "assigned" and attempt.node_id == node.pk and attempt.number == 1
    assignments, commands = node_hooks.poll_provider(node)
    assert [a.attempt_id for a in assignments] == [attempt.pk] and commands == []
    assert assignments[0].env == {"SECRET": "v"}  # a platform node gets the env
    assert node_hooks.poll_provider(node) == ([], [])  # no busy loop: handed once


def test_not_due_says_when_each_outstanding_attempt_was_handed_unless_one_is_due():
    now = timezone.now()
    again = now - timedelta(seconds=60)
    recent, old = now - timedelta(seconds=5), now - timedelta(seconds=90)
    assert node_hooks.not_due(
        [("assigned", "", recent, None), ("running", "cancelled", None, recent)], again=again
    ) == [
        recent,
        recent,
    ]
    assert node_hooks.not_due([("assigned", "", None, None)], again=again) is None  # never handed: due
    assert node_hooks.not_due([("assigned", "", old, None)], again=again) is None  # handed long ago: due again
    assert node_hooks.not_due([("running", "cancelled", None, None)], again=again) is None  # a stop not yet sent


def test_the_poll_provider_says_until_when_it_has_nothing(placed, settings, django_assert_num_queries):
    """An empty answer carries when it stops being true without a wake-up: the redelivery of an assignment
    handed over and not started (or of a stop order not obeyed); no such thing pending: never."""
    import math

    job_id, attempt, node, _ = placed()
    handed = node_hooks.poll_provider(node)
    assert handed.quiet_until == math.inf  # it handed the attempt over: nothing else is due
    delivered = Attempt.objects.get(pk=attempt.pk).delivered_at
    with django_assert_num_queries(1):  # the poll an agent sends right after taking it: one read, no transaction
        quiet = node_hooks.poll_provider(node)
    assert quiet == ([], [])
    assert quiet.quiet_until == pytest.approx(
        (delivered + timedelta(seconds=settings.EULER_JOB_REDELIVER_AFTER)).timestamp()
    )
    Attempt.objects.filter(pk=attempt.pk).update(
        delivered_at=delivered - timedelta(seconds=settings.EULER_JOB_REDELIVER_AFTER + 1)
    )
    assert [a.attempt_id for a in node_hooks.poll_provider(node)[0]] == [attempt.pk]  # due again: handed again
    Attempt.objects.filter(pk=attempt.pk).update(stop_reason="cancelled")
    stop = node_hooks.poll_provider(node)
    assert [c.attempt_id for c in stop[1]] == [attempt.pk]
    sent = Attempt.objects.get(pk=attempt.pk).stop_sent_at
    assert node_hooks.poll_provider(node).quiet_until == pytest.approx(
        (sent + timedelta(seconds=settings.EULER_JOB_REDELIVER_AFTER)).timestamp()
    )


def test_env_never_reaches_a_community_node(submit, make_node, schedule):
    community = make_node(trust="community", public_pool=True)
    job = submit(env={"SECRET": "v"})
    schedule()
    assert state_of(job["id"]) == "queued"
    assert "not platform nodes" in Job.objects.get(pk=job["id"]).pending_reason
    assert node_hooks.poll_provider(community) == ([], [])


def test_running_then_exit_0_succeeds_and_duplicates_change_nothing(placed, node_client):
    job_id, attempt, _, cred = placed()
    r = report(node_client, cred, attempt.pk, state="running", container_id="c1")
    assert r.status_code == 200 and r.json() == {"accepted": True, "stop": False}
    assert state_of(job_id) == "running"
    assert report(node_client, cred, attempt.pk, state="running").json()["accepted"] is True
    r = report(node_client, cred, attempt.pk, state="ended", reason="exited", exit_code=0)
    assert r.status_code == 200 and state_of(job_id) == "succeeded"
    events = Job.objects.get(pk=job_id).events.count()
    again = report(node_client, cred, attempt.pk, state="ended", reason="exited", exit_code=1, message="lender text",
                   outputs="truncated", outputs_message="lender text")  # fmt: skip
    assert again.status_code == 409 and again.json()["code"] == "stale_attempt"
    assert report(node_client, cred, attempt.pk, state="running").status_code == 409
    job = Job.objects.get(pk=job_id)
    assert not job.events.filter(message__contains="lender text").exists()
    assert job.state == "succeeded" and job.events.count() == events
    assert Attempt.objects.get(pk=attempt.pk).exit_code == 0


def test_an_end_reported_before_running_wins_and_the_late_running_is_fenced(placed, node_client):
    job_id, attempt, _, cred = placed()
    report(node_client, cred, attempt.pk, state="ended", reason="exited", exit_code=3)
    job = Job.objects.get(pk=job_id)
    assert job.state == "failed" and job.exit_code == 3 and job.reason == "exited"
    r = report(node_client, cred, attempt.pk, state="running", container_id="late")
    assert r.status_code == 409 and r.json()["code"] == "stale_attempt" and r.json()["stop"] is True
    assert state_of(job_id) == "failed" and Attempt.objects.get(pk=attempt.pk).container_id == ""


@pytest.mark.parametrize("reason", ["oom", "image_pull_failed", "start_failed", "timeout"])
def test_failure_reasons_end_the_job_failed_with_that_reason(placed, node_client, reason):
    job_id, attempt, _, cred = placed()
    report(node_client, cred, attempt.pk, state="ended", reason=reason, exit_code=137, message="m")
    job = Job.objects.get(pk=job_id)
    assert job.state == "failed" and job.reason == reason


def test_a_report_from_another_node_is_fenced(placed, make_node, credential_for, node_client):
    job_id, attempt, _, _ = placed()
    intruder = credential_for(make_node())
    r = report(node_client, intruder, attempt.pk, state="ended", reason="exited", exit_code=0)
    assert r.status_code == 409
    assert r.json()["code"] == "stale_attempt" and r.json()["stop"] is True
    assert state_of(job_id) == "assigned"


def test_an_unknown_attempt_is_fenced_and_a_bad_body_is_a_400(placed, node_client):
    _, attempt, _, cred = placed()
    assert report(node_client, cred, 987654, state="running").json()["code"] == "stale_attempt"
    r = report(node_client, cred, attempt.pk, state="exploded")
    assert r.status_code == 400 and r.json()["code"] == "invalid_report"


def test_cancel_of_a_running_job_stops_the_container_and_holds_resources_until_it_ends(placed, node_client, api):
    job_id, attempt, node, cred = placed()
    report(node_client, cred, attempt.pk, state="running")
    assert api.post(f"/api/v1/jobs/{job_id}/cancel").json()["state"] == "cancelled"
    _, commands = node_hooks.poll_provider(node)
    assert [(c.attempt_id, c.reason) for c in commands] == [(attempt.pk, "cancelled")]
    assert Attempt.objects.get(pk=attempt.pk).state == "running"  # still holds its CPU
    r = api.post(f"/api/v1/jobs/{job_id}/retry")
    assert r.status_code == 409 and r.json()["code"] == "attempt_stopping"
    report(node_client, cred, attempt.pk, state="ended", reason="cancelled", exit_code=143)
    assert Attempt.objects.get(pk=attempt.pk).state == "cancelled"
    assert state_of(job_id) == "cancelled"
    assert api.post(f"/api/v1/jobs/{job_id}/retry").json()["state"] == "queued"


def test_a_stopped_container_missing_from_heartbeats_settles_the_attempt(placed, node_client, api):
    job_id, attempt, node, cred = placed()
    report(node_client, cred, attempt.pk, state="running")
    api.post(f"/api/v1/jobs/{job_id}/cancel")
    node_hooks.poll_provider(node)
    Attempt.objects.filter(pk=attempt.pk).update(stop_sent_at=timezone.now() - timedelta(seconds=10))
    hb = protocol.Heartbeat(resources=protocol.Resources(cpu_milli=4000, memory_bytes=1 << 33), running=[])
    assert node_hooks.heartbeat_hook(node, hb) == []
    assert Attempt.objects.get(pk=attempt.pk).state == "cancelled"


def test_the_heartbeat_hook_stops_containers_of_attempts_that_are_not_current(placed):
    job_id, attempt, node, _ = placed()
    running = [
        protocol.RunningAttempt(attempt_id=attempt.pk, state="running"),
        protocol.RunningAttempt(attempt_id=424242, state="running"),
    ]
    hb = protocol.Heartbeat(resources=protocol.Resources(cpu_milli=1, memory_bytes=1), running=running)
    commands = node_hooks.heartbeat_hook(node, hb)
    assert [(c.attempt_id, c.reason) for c in commands] == [(424242, "stale_attempt")]


def test_a_lost_node_requeues_the_job_with_backoff_and_the_old_node_is_fenced(placed, node_client, make_node, schedule):
    job_id, attempt, node, cred = placed()
    report(node_client, cred, attempt.pk, state="running")
    assert attempts.node_lost(node_id=node.pk) == 1
    job = Job.objects.get(pk=job_id)
    assert job.state == "queued" and job.retries_used == 1 and job.not_before > timezone.now()
    assert Attempt.objects.get(pk=attempt.pk).state == "lost"
    r = report(node_client, cred, attempt.pk, state="ended", reason="exited", exit_code=0)
    assert r.status_code == 409 and r.json()["stop"] is True
    Job.objects.filter(pk=job_id).update(not_before=None)
    node.online = False
    node.save()
    make_node()
    assert schedule().placed == 1
    second = Job.objects.get(pk=job_id).current_attempt
    assert second.number == 2 and second.node_id != node.pk


def test_a_lost_node_ends_the_job_lost_when_no_retries_remain(placed, node_client):
    job_id, attempt, node, _ = placed(max_retries=0)
    attempts.node_lost(node_id=node.pk)
    job = Job.objects.get(pk=job_id)
    assert job.state == "lost" and job.reason == "lost"


def test_the_node_offline_signal_loses_the_nodes_attempts(placed, django_capture_on_commit_callbacks):
    from nodes.liveness import mark_offline

    job_id, attempt, node, _ = placed()
    with django_capture_on_commit_callbacks(execute=True):
        mark_offline(now=timezone.now() + timedelta(hours=1))
    assert Attempt.objects.get(pk=attempt.pk).state == "lost"
    assert state_of(job_id) == "queued"


def test_the_offline_sweep_catches_attempts_on_offline_nodes(placed):
    job_id, attempt, node, _ = placed()
    type(node).objects.filter(pk=node.pk).update(online=False)
    assert attempts.offline_sweep() == 1
    assert state_of(job_id) == "queued"


def test_failures_and_timeouts_are_retried_only_when_asked(placed, node_client):
    job_id, attempt, _, cred = placed(retry_on=["lost", "failed"], max_retries=2)
    report(node_client, cred, attempt.pk, state="ended", reason="exited", exit_code=1)
    assert state_of(job_id) == "queued"
    job_id, attempt, _, cred = placed()
    report(node_client, cred, attempt.pk, state="ended", reason="timeout", exit_code=137)
    assert state_of(job_id) == "failed"


def test_backoff_grows_exponentially(placed, node_client, schedule):
    job_id, attempt, node, cred = placed(retry_on=["failed"], max_retries=3)
    delays = []
    for _ in range(3):
        before = timezone.now()
        attempt = Job.objects.get(pk=job_id).current_attempt
        report(node_client, cred, attempt.pk, state="ended", reason="exited", exit_code=1)
        job = Job.objects.get(pk=job_id)
        delays.append(round((job.not_before - before).total_seconds()))
        Job.objects.filter(pk=job_id).update(not_before=None)
        assert schedule().placed == 1
    # 2 * 2**n seconds, less up to 20% jitter (jobs/retrypolicy.py)
    assert all(0.8 * full - 1 <= d <= full for d, full in zip(delays, [2, 4, 8], strict=True)), delays
    report(node_client, cred, Job.objects.get(pk=job_id).current_attempt_id, state="ended", exit_code=1)
    assert state_of(job_id) == "failed"


def test_the_server_backstop_fails_attempts_past_their_deadline_and_orders_a_stop(placed, node_client):
    job_id, attempt, node, cred = placed(timeout_seconds=5)
    report(node_client, cred, attempt.pk, state="running")
    assert attempts.deadlines_expire(now=timezone.now()) == 0
    assert attempts.deadlines_expire(now=timezone.now() + timedelta(hours=1)) == 1
    job = Job.objects.get(pk=job_id)
    assert job.state == "failed" and job.reason == "timeout"
    _, commands = node_hooks.poll_provider(node)
    assert [(c.attempt_id, c.reason) for c in commands] == [(attempt.pk, "timeout")]


def test_a_running_attempt_its_node_stops_listing_is_lost_after_a_grace(placed, node_client):
    job_id, attempt, node, cred = placed()
    report(node_client, cred, attempt.pk, state="running")
    hb = protocol.Heartbeat(resources=protocol.Resources(cpu_milli=1, memory_bytes=1), running=[])
    node_hooks.heartbeat_hook(node, hb)
    assert Attempt.objects.get(pk=attempt.pk).state == "running"  # just started: the list may predate it
    Attempt.objects.filter(pk=attempt.pk).update(started_at=timezone.now() - timedelta(minutes=5))
    listed = [protocol.RunningAttempt(attempt_id=attempt.pk, state="running")]
    node_hooks.heartbeat_hook(node, hb.model_copy(update={"running": listed}))
    assert Attempt.objects.get(pk=attempt.pk).state == "running"
    node_hooks.heartbeat_hook(node, hb)
    assert Attempt.objects.get(pk=attempt.pk).state == "lost"
    assert state_of(job_id) == "queued"
