"""Parallel scheduling passes (threads, each with its own connection) never double-book a node."""

from __future__ import annotations

import random
import threading
from collections import defaultdict

import pytest
from django.db import connection, connections, transaction

from jobs.models import Attempt, Job
from jobs.scheduling import cycle
from jobs.states import ATTEMPT_ACTIVE

from .conftest import GIB, seed_body

pytestmark = pytest.mark.django_db(transaction=True)


def make_job(project, **over) -> Job:
    """A queued job written directly: no on-commit pass, so that only the threads below schedule."""
    from django.utils import timezone

    return Job.objects.create(project=project, queued_at=timezone.now(), **seed_body(**over))


def _in_threads(fn, n: int) -> list:
    barrier = threading.Barrier(n)
    results, errors = [], []

    def run():
        try:
            barrier.wait()
            results.append(fn())
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


@pytest.mark.parametrize("entry", ["one_pass", "run"])
def test_parallel_passes_never_double_book_cpu_memory_or_a_gpu(project, make_node, entry):
    from quotas.models import Quota

    Quota.objects.filter(project=project).update(max_concurrent_jobs=1000)
    nodes = [make_node(gpus=2, cpu_milli=4000, memory_bytes=8 * GIB) for _ in range(3)]
    rng = random.Random(3)
    for i in range(60):
        spec = seed_body(
            name=f"j{i}",
            cpu_milli=rng.choice([500, 1000, 1500]),
            memory_bytes=rng.choice([1, 2]) * GIB,
            gpu_count=rng.choice([0, 0, 1]),
        )
        make_job(project, **spec)

    def passes():
        if entry == "run":  # the Redis-locked entry point that tasks use
            return sum(cycle.run().placed for _ in range(4))
        return sum(cycle.one_pass(batch=7).placed for _ in range(4))  # straight at the database lock

    placed = sum(_in_threads(passes, 6))
    active = list(
        Attempt.objects.filter(state__in=ATTEMPT_ACTIVE).values(
            "node_id", "cpu_milli", "memory_bytes", "gpu_uuids", "job_id"
        )
    )
    assert placed == len(active) > 0
    cpu, mem, gpus = defaultdict(int), defaultdict(int), []
    for a in active:
        cpu[a["node_id"]] += a["cpu_milli"]
        mem[a["node_id"]] += a["memory_bytes"]
        gpus.extend(a["gpu_uuids"])
    assert all(cpu[n.pk] <= n.cpu_milli for n in nodes)
    assert all(mem[n.pk] <= n.memory_bytes for n in nodes)
    assert len(gpus) == len(set(gpus))
    assert len({a["job_id"] for a in active}) == len(active)  # one attempt per job
    assert Job.objects.filter(state="assigned").count() == len(active)
    stored = {n.pk: (n.allocated_cpu_milli, n.allocated_memory_bytes) for n in type(nodes[0]).objects.all()}
    assert all(stored[n.pk] == (cpu[n.pk], mem[n.pk]) for n in nodes)


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the advisory lock is PostgreSQL's")
def test_a_pass_is_refused_while_another_holds_the_advisory_lock(project, make_node):
    make_node()
    make_job(project)
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_xact_lock(%s)", [cycle.ADVISORY_KEY])
        (stats,) = _in_threads(cycle.one_pass, 1)
    assert stats.busy and stats.placed == 0
    assert cycle.one_pass().placed == 1


def test_fifty_parallel_submissions_never_run_more_than_the_concurrency_quota(project, make_node, client_for):
    """50 submits through the API in parallel threads, each firing its on-commit pass, plus extra passes:
    no more than 3 jobs are ever assigned or running (nothing ends, so the final count is the maximum)."""
    from quotas.models import Quota
    from quotas.services import apikey_create

    Quota.objects.filter(project=project).update(max_concurrent_jobs=3)
    for _ in range(4):
        make_node(cpu_milli=64000, memory_bytes=64 * GIB)
    _, secret = apikey_create(project=project, label="parallel")
    submitted = []

    def submit():
        api = client_for(secret)
        codes = []
        for i in range(5):
            r = api.post("/api/v1/jobs", seed_body(name=f"p{i}"), format="json")
            codes.append(r.status_code)
            cycle.run()
        return codes

    submitted = [code for codes in _in_threads(submit, 10) for code in codes]
    assert submitted == [201] * 50
    _in_threads(lambda: cycle.one_pass(batch=5).placed, 4)
    assert Attempt.objects.filter(state__in=ATTEMPT_ACTIVE).count() == 3
    assert Job.objects.filter(state__in=["assigned", "running"]).count() == 3
    held = Job.objects.filter(state="queued")
    assert held.count() == 47
    assert all(reason.startswith("concurrency_quota") for reason in held.values_list("pending_reason", flat=True))
