"""The state table: every allowed move goes through, every other one is refused with invalid_transition."""

from __future__ import annotations

import itertools

import pytest
from django.db import transaction
from django.utils import timezone

from euler.errors import Conflict
from jobs import transitions
from jobs.models import Job, JobEvent
from jobs.states import ALLOWED, TERMINAL, AttemptState, JobState, attempt_outcome, retry_category, retry_delay

from .conftest import seed_body

EVERY_PAIR = list(itertools.product(JobState.values, JobState.values))


@pytest.mark.django_db
@pytest.mark.parametrize(("source", "target"), EVERY_PAIR)
def test_each_move_is_allowed_only_by_the_table(project, source, target):
    job = Job.objects.create(project=project, queued_at=timezone.now(), state=source, **seed_body())
    with transaction.atomic():
        locked = transitions.lock(job.pk)
        if target in ALLOWED[source]:
            transitions.move(locked, target, why="test")
            assert Job.objects.get(pk=job.pk).state == target
            event = JobEvent.objects.get(job=job)
            assert (event.from_state, event.to_state) == (source, target)
        else:
            with pytest.raises(Conflict) as caught:
                transitions.move(locked, target)
            assert caught.value.code == "invalid_transition"
            assert Job.objects.get(pk=job.pk).state == source
            assert not JobEvent.objects.filter(job=job).exists()


def test_terminal_states_only_lead_back_to_the_queue():
    for state in TERMINAL:  # waiting: a retried array task whose array runs its parallelism already
        assert ALLOWED[state] == {JobState.QUEUED, JobState.WAITING}


def test_a_waiting_job_is_released_to_the_queue_or_cancelled():
    assert ALLOWED[JobState.WAITING] == {JobState.QUEUED, JobState.CANCELLED}


def test_ended_reports_map_to_attempt_states():
    assert attempt_outcome(reason="exited", exit_code=0) == AttemptState.SUCCEEDED
    assert attempt_outcome(reason=None, exit_code=0) == AttemptState.SUCCEEDED
    assert attempt_outcome(reason="exited", exit_code=3) == AttemptState.FAILED
    assert attempt_outcome(reason="oom", exit_code=137) == AttemptState.FAILED
    assert attempt_outcome(reason="timeout", exit_code=137) == AttemptState.FAILED
    assert attempt_outcome(reason="cancelled", exit_code=143) == AttemptState.CANCELLED
    assert attempt_outcome(reason="lost", exit_code=None) == AttemptState.LOST


def test_retry_categories_and_backoff():
    assert retry_category(attempt_state=AttemptState.LOST, reason="lost") == "lost"
    assert retry_category(attempt_state=AttemptState.FAILED, reason="timeout") == "timeout"
    assert retry_category(attempt_state=AttemptState.FAILED, reason="oom") == "failed"
    assert retry_category(attempt_state=AttemptState.SUCCEEDED, reason="exited") is None
    assert retry_category(attempt_state=AttemptState.CANCELLED, reason="cancelled") is None
    assert [retry_delay(retries_used=n, base=2, cap=10) for n in range(5)] == [2, 4, 8, 10, 10]
