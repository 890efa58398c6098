"""An agent restarted mid-job: the attempts it leaves running survive its node going offline meanwhile.

Each interleaving of the restarted agent's return with the server's liveness passes is forced in order (the
offline pass, the lost-attempt sweep, a heartbeat that races the offline pass), never left to timing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import attempts
from jobs.models import Attempt, Job
from nodeagent import protocol
from nodes import livestore, offline
from nodes.liveness import mark_offline
from nodes.models import Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def node_client():
    from rest_framework.test import APIClient

    def make(credential):
        c = APIClient()
        if credential:
            c.credentials(HTTP_AUTHORIZATION=f"Bearer {credential}")
        return c

    return make


@pytest.fixture
def running(submit, make_node, credential_for, schedule, node_client):
    """A job whose attempt runs on a platform node: (job id, attempt, node, credential)."""
    make_node()
    job = submit()
    assert schedule().placed == 1
    attempt = Attempt.objects.select_related("node").get(job_id=job["id"])
    cred = credential_for(attempt.node)
    assert post(node_client, cred, protocol.PATH_ATTEMPT_REPORT.format(attempt_id=attempt.pk), state="running").ok
    return job["id"], attempt, attempt.node, cred


class Reply:
    def __init__(self, r):
        self.status, self.body = r.status_code, r.json()
        self.ok = r.status_code == 200


def post(node_client, cred, path, **body) -> Reply:
    return Reply(node_client(cred).post("/node-api/v1/" + path, body, format="json"))


def heartbeat(node_client, cred, *attempt_ids) -> Reply:
    running = [{"attempt_id": a, "state": "running"} for a in attempt_ids]
    res = {"cpu_milli": 4000, "memory_bytes": 8 << 30, "gpus": [], "docker_version": "27.0"}
    return post(node_client, cred, protocol.PATH_HEARTBEAT, agent_version="t", resources=res, running=running)


def offline_pass(capture, *, after: timedelta = timedelta(minutes=10)) -> list[int]:
    """The beat's offline pass `after` from now (by default: the node's window long passed), with the
    node_offline signal's receivers."""
    with capture(execute=True):
        return mark_offline(now=timezone.now() + after)


def ended(node_client, cred, attempt_id, code: int) -> Reply:
    path = protocol.PATH_ATTEMPT_REPORT.format(attempt_id=attempt_id)
    return post(node_client, cred, path, state="ended", reason="exited", exit_code=code)


@pytest.mark.parametrize("back", ["before the offline pass", "after the offline pass", "after the sweep"])
def test_a_restarted_agent_reports_its_containers_end_once_whenever_it_comes_back(
    running, node_client, django_capture_on_commit_callbacks, back
):
    job_id, attempt, node, cred = running
    r = post(node_client, cred, protocol.PATH_LEAVING, attempts=[attempt.pk])
    assert r.ok and r.body == {"held": [attempt.pk], "hold_seconds": 60.0}
    if back == "before the offline pass":
        assert heartbeat(node_client, cred, attempt.pk).ok
        assert offline_pass(django_capture_on_commit_callbacks, after=timedelta(0)) == []
    else:
        assert offline_pass(django_capture_on_commit_callbacks) == [node.pk]
    if back == "after the sweep":
        assert attempts.offline_sweep() == 0
    assert Attempt.objects.get(pk=attempt.pk).state == "running"
    if back != "before the offline pass":
        assert heartbeat(node_client, cred, attempt.pk).ok
        assert Node.objects.get(pk=node.pk).online
    assert ended(node_client, cred, attempt.pk, 3).ok
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.exit_code, job.attempts.count()) == ("failed", 3, 1)


def test_the_hold_lasts_the_configured_time_and_without_it_the_sweep_loses_the_attempts(
    running, node_client, django_capture_on_commit_callbacks
):
    job_id, attempt, node, cred = running
    assert post(node_client, cred, protocol.PATH_LEAVING, attempts=[attempt.pk]).ok
    assert 55 <= livestore.client().ttl(f"{livestore.ns()}hold:{node.pk}") <= 60
    offline_pass(django_capture_on_commit_callbacks)
    assert Attempt.objects.get(pk=attempt.pk).state == "running"
    livestore.client().delete(f"{livestore.ns()}hold:{node.pk}")  # what Redis does once the hold expires
    assert attempts.offline_sweep() == 1
    assert Attempt.objects.get(pk=attempt.pk).state == "lost" and Job.objects.get(pk=job_id).state == "queued"
    assert ended(node_client, cred, attempt.pk, 0).status == 409  # fenced: its rights ended with the attempt


def test_an_agent_stopped_without_a_word_loses_its_attempts_when_its_node_goes_offline(
    running, django_capture_on_commit_callbacks
):
    job_id, attempt, node, _ = running
    assert offline_pass(django_capture_on_commit_callbacks) == [node.pk]
    assert Attempt.objects.get(pk=attempt.pk).state == "lost"


def test_no_hold_when_the_operator_turned_it_off(running, node_client, settings, django_capture_on_commit_callbacks):
    settings.EULER_NODE_RESTART_HOLD = 0
    _, attempt, _, cred = running
    r = post(node_client, cred, protocol.PATH_LEAVING, attempts=[attempt.pk])
    assert r.ok and r.body["hold_seconds"] == 0
    offline_pass(django_capture_on_commit_callbacks)
    assert Attempt.objects.get(pk=attempt.pk).state == "lost"


def test_a_node_holds_only_its_own_current_attempts(running, submit, make_node, credential_for, schedule, node_client):
    _, mine, node, cred = running
    Node.objects.filter(pk=node.pk).update(online=False)  # the next job goes to the other node
    other = make_node()
    job = submit()
    assert schedule().placed == 1
    theirs = Attempt.objects.get(job_id=job["id"])
    assert theirs.node_id == other.pk
    r = post(node_client, cred, protocol.PATH_LEAVING, attempts=[theirs.pk, mine.pk, 987654])
    assert r.ok and r.body["held"] == [mine.pk]
    assert livestore.held_attempts(other.pk) == set()


def test_a_bad_or_unauthenticated_notice_is_refused(running, node_client):
    _, attempt, _, cred = running
    assert post(node_client, cred, protocol.PATH_LEAVING, attempts=["x"]).body["code"] == "invalid_leaving"
    assert post(node_client, cred, protocol.PATH_LEAVING, attempts=[], extra=1).status == 400
    assert post(node_client, None, protocol.PATH_LEAVING, attempts=[attempt.pk]).status == 401


def test_a_heartbeat_that_races_the_offline_pass_keeps_the_node_and_its_attempts(
    running, node_client, monkeypatch, django_capture_on_commit_callbacks
):
    """The pass judged the node silent; the restarted agent's first heartbeat lands before the pass acts."""
    _, attempt, node, cred = running
    judged = offline.silent_nodes

    def then_a_heartbeat(now):
        silent = judged(now)
        assert [pk for pk, _, _ in silent] == [node.pk]
        assert heartbeat(node_client, cred, attempt.pk).ok
        return silent

    monkeypatch.setattr(offline, "silent_nodes", then_a_heartbeat)
    assert offline_pass(django_capture_on_commit_callbacks) == []
    assert Node.objects.get(pk=node.pk).online and Attempt.objects.get(pk=attempt.pk).state == "running"
