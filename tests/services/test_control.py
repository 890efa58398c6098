"""The services controller's decisions (services/control.py): replacement, drain, scaling, rolling updates."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from services import control
from services.control import (
    DRAINING,
    ENDED,
    PENDING,
    PROBING,
    READY,
    STOPPING,
    Drain,
    End,
    Finish,
    Probe,
    Promote,
    Ready,
    ReplicaView,
    Rollback,
    ServiceView,
    Start,
    Stop,
    Timing,
    reconcile,
)

T = Timing(drain_seconds=10, ready_timeout=100)


def rv(id, state=READY, revision=1, created_at=0.0, **kw):
    return ReplicaView(id=id, revision=revision, state=state, created_at=created_at, ever_ready=state == READY, **kw)


def svc(replicas=2, revision=1, stable=1, **kw):
    return ServiceView(replicas=replicas, revision=revision, stable_revision=stable, **kw)


def test_a_new_service_starts_its_replicas():
    assert reconcile(svc(2, stable=None), [], 0, T) == [Start(1), Start(1)]


def test_a_running_job_gets_an_instance_then_enters_rotation_once_healthy():
    assert reconcile(svc(1, stable=None), [rv(1, PENDING, running_attempt=7)], 1, T) == [Probe(1, 7)]
    assert reconcile(svc(1, stable=None), [rv(1, PROBING)], 1, T) == []
    actions = reconcile(svc(1, stable=None), [rv(1, PROBING, healthy=True)], 1, T)
    assert actions == [Ready(1), Promote(1)]


def test_a_replica_whose_job_ended_is_ended_and_replaced():
    actions = reconcile(svc(2), [rv(1), rv(2, job_ended=True)], 5, T)
    assert actions == [End(2, "job_ended"), Start(1)]


def test_a_ready_replica_failing_its_probe_is_drained_then_replaced():
    actions = reconcile(svc(2), [rv(1), rv(2, failures=3)], 5, T)
    assert Drain(2, "probe_failed") in actions and Start(1) in actions
    assert reconcile(svc(2), [rv(1), rv(2, failures=2)], 5, T) == []  # under `failures`: kept


def test_drain_waits_its_time_before_the_stop_and_the_stop_waits_for_the_job():
    draining = rv(2, DRAINING, drain_started_at=100.0)
    assert Stop(2) not in reconcile(svc(1), [rv(1), draining], 105, T)
    assert Stop(2) in reconcile(svc(1), [rv(1), draining], 110, T)
    assert reconcile(svc(1), [rv(1), rv(2, STOPPING)], 200, T) == []
    assert reconcile(svc(1), [rv(1), rv(2, STOPPING, job_ended=True)], 200, T) == [End(2, "stopped")]


def test_scale_down_drains_not_ready_replicas_first_then_the_newest():
    rows = [rv(1), rv(2), rv(3, PENDING), rv(4)]
    assert reconcile(svc(2), rows, 5, T) == [Drain(3, "scaled_down"), Drain(4, "scaled_down")]


def test_scale_up_starts_the_missing_replicas():
    assert reconcile(svc(3), [rv(1)], 5, T) == [Start(1), Start(1)]


def test_a_replica_never_ready_is_replaced_when_there_is_nothing_to_roll_back_to():
    actions = reconcile(svc(1, stable=None), [rv(1, PROBING, created_at=0)], 100, T)
    assert actions[0] == Drain(1, "not_ready") and Start(1) in actions


def test_a_crash_looping_service_without_a_stable_revision_backs_off():
    ended = [rv(i, ENDED, ended_at=50.0 + i) for i in (1, 2, 3)]
    ended = [replace(r, ever_ready=False) for r in ended]
    assert reconcile(svc(1, stable=None), ended, 55, T) == []  # 3 failures: 20 s backoff after the last
    assert reconcile(svc(1, stable=None), ended, 80, T) == [Start(1)]


def test_deleting_drains_every_live_replica_then_finishes():
    actions = reconcile(svc(2, deleting=True), [rv(1), rv(2, PENDING, running_attempt=3)], 5, T)
    assert actions == [Drain(1, "deleted"), Drain(2, "deleted")]
    assert reconcile(svc(2, deleting=True), [rv(1, ENDED), rv(2, ENDED)], 5, T) == [Finish()]


def test_rollout_starts_one_new_replica_and_keeps_every_old_one_until_it_is_ready():
    rows = [rv(1), rv(2)]
    assert reconcile(svc(2, revision=2), rows, 5, T) == [Start(2)]
    rows.append(rv(3, PENDING, revision=2))
    assert reconcile(svc(2, revision=2), rows, 6, T) == []  # readiness-gated: nothing more, nothing drained
    rows[-1] = rv(3, PROBING, revision=2, healthy=True)
    actions = reconcile(svc(2, revision=2), rows, 7, T)
    assert actions == [Ready(3), Drain(1, "rolled_out"), Start(2)]


def test_rollout_rolls_back_when_a_new_replica_is_never_ready():
    rows = [rv(1), rv(2), rv(3, PROBING, revision=2, created_at=0)]
    actions = reconcile(svc(2, revision=2), rows, 100, T)
    assert isinstance(actions[0], Rollback) and actions[0].to_revision == 1
    assert Drain(3, "rolled_out") in actions  # the bad one goes, the old ones stay
    assert not any(isinstance(a, Drain) and a.replica in (1, 2) for a in actions)


def test_rollout_rolls_back_after_new_replicas_crash_before_ready():
    crashed = [replace(rv(i, ENDED, revision=2, ended_at=10.0), ever_ready=False) for i in (3, 4, 5)]
    actions = reconcile(svc(2, revision=2), [rv(1), rv(2), *crashed], 20, T)
    assert actions == [Rollback(1, "3 replicas of revision 2 ended before they were ready")]


# --- interleavings ---------------------------------------------------------------------------------------------------
class World:
    """The controller's actions applied to simulated replicas, and the events of the world in a random order."""

    def __init__(self, rng, desired, *, bad_revision=None):
        self.rng, self.now, self.next_id = rng, 0.0, 1
        self.service = svc(desired, revision=1, stable=1)
        self.rows: dict[int, ReplicaView] = {}
        self.bad = bad_revision
        for _ in range(desired):
            self._add(1, READY)

    def _add(self, revision, state=PENDING):
        r = ReplicaView(id=self.next_id, revision=revision, state=state, created_at=self.now, ever_ready=state == READY)
        self.rows[r.id] = r
        self.next_id += 1

    def apply(self, actions):
        for a in actions:
            if isinstance(a, Start):
                self._add(a.revision)
            elif isinstance(a, Probe):
                self.rows[a.replica] = replace(self.rows[a.replica], state=PROBING)
            elif isinstance(a, Ready):
                self.rows[a.replica] = replace(self.rows[a.replica], state=READY, ever_ready=True)
            elif isinstance(a, Drain):
                self.rows[a.replica] = replace(self.rows[a.replica], state=DRAINING, drain_started_at=self.now)
            elif isinstance(a, Stop):
                self.rows[a.replica] = replace(self.rows[a.replica], state=STOPPING)
            elif isinstance(a, End):
                self.rows[a.replica] = replace(self.rows[a.replica], state=ENDED, ended_at=self.now, job_ended=False)
            elif isinstance(a, Rollback):
                self.service = replace(self.service, revision=a.to_revision)
            elif isinstance(a, Promote):
                self.service = replace(self.service, stable_revision=a.revision)

    def events(self):
        """Some of what may happen between passes, in a random order: jobs start, probes pass, jobs end."""
        self.now += self.rng.choice([0.5, 1, 3, 7])
        for r in list(self.rows.values()):
            if self.rng.random() < 0.5:
                continue
            if r.state == PENDING and r.running_attempt is None:
                self.rows[r.id] = replace(r, running_attempt=1000 + r.id)
            elif r.state == PROBING and r.revision != self.bad:
                self.rows[r.id] = replace(r, healthy=True)
            elif r.state == STOPPING:
                self.rows[r.id] = replace(r, job_ended=True)

    def ready(self):
        return [r for r in self.rows.values() if r.state == READY]

    def live(self):
        return [r for r in self.rows.values() if r.state in control.LIVE]


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("desired", [1, 2, 3])
def test_rolling_update_never_has_fewer_ready_replicas_than_asked_and_ends_on_the_new_revision(seed, desired):
    w = World(random.Random(seed), desired)
    w.service = replace(w.service, revision=2)
    for _ in range(400):
        w.apply(reconcile(w.service, list(w.rows.values()), w.now, T))
        assert len(w.ready()) >= desired  # no call ever finds fewer replicas in rotation than before
        assert len(w.live()) <= desired + 1  # surge 1
        if w.service.stable_revision == 2 and all(r.revision == 2 for r in w.live()):
            break
        w.events()
    assert w.service.stable_revision == 2
    assert len(w.live()) == desired and all(r.revision == 2 and r.state == READY for r in w.live())


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("desired", [1, 2])
def test_a_revision_that_never_gets_ready_is_rolled_back_without_losing_the_old_replicas(seed, desired):
    w = World(random.Random(seed), desired, bad_revision=2)
    w.service = replace(w.service, revision=2)
    for _ in range(600):
        w.apply(reconcile(w.service, list(w.rows.values()), w.now, T))
        assert len(w.ready()) >= desired
        if w.service.revision == 1 and all(r.revision == 1 and r.state == READY for r in w.live()):
            if len(w.live()) == desired:
                break
        w.events()
    assert w.service.revision == 1 and w.service.stable_revision == 1
    assert len(w.live()) == desired
