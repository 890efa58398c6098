"""euler/prepared.py: a read query compiled once gives what its ORM build gives, for every argument shape; and every
prepared query of the project, run on a database with rows of each kind, gives exactly its ORM build's rows. And
euler/writes.py's writes are those of save(), create() and update()."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from euler.errors import NotFound
from euler.prepared import Prepared
from tests.jobs.conftest import seed_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(project, other_project, make_node, submit, schedule, make_user, client_for, api):
    """Two projects' jobs queued, assigned, running and ended on three nodes (one with GPUs, one lent by a user), a
    preemption, a dependency: rows for every prepared query to read."""
    from jobs.models import Attempt, Preemption
    from jobs.workflow_models import Dependency
    from nodes.models import EnrollmentToken
    from quotas.ledger import ledger_add
    from quotas.services import apikey_create

    lender = make_user("lena")
    plain = make_node(labels={"zone": "a", "tier": "x"}, region="eu")
    gpu = make_node(gpus=2)
    lent = make_node(trust="community", public_pool=True)
    later = timezone.now() + timedelta(days=1)
    for i, (node, by) in enumerate(((plain, None), (gpu, lender), (lent, lender), (lent, lender))):
        EnrollmentToken.objects.create(node=node, created_by=by, lookup=f"t{i}", digest="d", expires_at=later)
    _, secret = apikey_create(project=other_project, label="tests")
    other = client_for(secret)
    jobs = [submit(name=f"a{i}") for i in range(3)] + [submit(other, name="b0"), submit(gpu_count=1, name="g")]
    r = api.post("/api/v1/jobs", seed_body(name="arr", array={"count": 2}), format="json")
    assert r.status_code == 201, r.json()
    schedule()
    queued = submit(name="queued-later", cpu_milli=64_000)  # never fits: stays queued
    attempts = list(Attempt.objects.order_by("pk"))
    now = timezone.now()
    Attempt.objects.filter(pk=attempts[0].pk).update(state="running", started_at=now)
    Attempt.objects.filter(pk=attempts[1].pk).update(state="succeeded", ended_at=now, started_at=now)
    Attempt.objects.filter(pk=attempts[2].pk).update(stop_reason="cancel", stop_grace=5)
    Preemption.objects.create(
        preemptor_id=queued["id"], victim_id=jobs[0]["id"], victim_attempt=attempts[0], node=plain, created_at=now
    )
    Dependency.objects.create(job_id=jobs[3]["id"], on_job_id=jobs[1]["id"], condition="succeeded")
    from jobs import logstore
    from jobs.models import LogChunk

    for attempt, n in ((attempts[0], 3), (attempts[1], 2)):
        for seq in range(n):
            LogChunk.objects.create(attempt=attempt, seq=seq, offset=seq * 6, stream="stdout", data=f"line {seq}\n")
    assert logstore.compact_attempt(attempts[1].pk)  # an ended attempt's log, archived
    ledger_add(project_id=project.pk, resource="cpu_core_seconds", amount=12.5, day=now.date())
    ledger_add(project_id=project.pk, resource="gpu_seconds", amount=3.0, day=now.date())
    return {
        "projects": [project.pk, other_project.pk],
        "nodes": [plain.pk, gpu.pk, lent.pk],
        "jobs": [j["id"] for j in jobs] + [queued["id"]],
        "attempts": [a.pk for a in attempts],
    }


def _fields(obj) -> dict:
    """A model instance's loaded fields, and its select_related ones'."""
    out = {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields if f.attname in obj.__dict__}
    for name, related in obj._state.fields_cache.items():
        out[name] = _fields(related) if related is not None else None
    return out


def _same(prepared: Prepared, *args) -> None:
    """The prepared query's rows are its ORM build's, in the same order where the statement orders them."""
    want = list(prepared.build(*args))
    got = prepared(*args)
    if want and isinstance(want[0], Model):
        want, got = [_fields(o) for o in want], [_fields(o) for o in got]
    ordered = prepared.build(*args).query.order_by
    assert (got if ordered else sorted(got, key=repr)) == (want if ordered else sorted(want, key=repr))
    assert [type(v) for v in got] == [type(v) for v in want]


def test_every_prepared_query_of_the_project_reads_what_its_orm_build_reads(world):
    from jobs import deps, fencing, logs_api, logstore, node_hooks, selectors, usage, wakeups
    from jobs.scheduling import claims, cycle, loading, saving
    from lending import ledger
    from quotas import selectors as quota_selectors
    from quotas import services as quota_services
    from quotas.models import ApiKey

    today = timezone.now().date()

    projects, nodes, jobs, attempts = world["projects"], world["nodes"], world["jobs"], world["attempts"]
    runs = [
        (cycle._ASSIGNED_COUNT,),
        (loading._NODE_ROWS,),
        (loading._USED_BY_NODE,),
        (loading._GPUS_BY_NODE,),
        (claims._CLAIMS,),
        (claims._LOWEST_ACTIVE,),
        (wakeups._QUEUED_ONE,),
    ]
    for ids in ({projects[0]}, set(projects), {projects[0], 10**9}, set()):
        runs += [(q, ids) for q in (loading._ACTIVE_BY_PROJECT, loading._CAPS, loading._WEIGHTS, loading._HELD)]
    for ids in (jobs[:1], jobs, [jobs[0], jobs[0], jobs[1]], []):
        runs += [(saving._ATTEMPT_COUNTS, ids), (deps._ANY_PENDING_ON, ids, []), (deps._ANY_PENDING_ON, [], ids)]
        runs.append((cycle._QUEUED_LOCKED, ids))
    for node_id in [*nodes, 10**9]:
        runs += [(q, node_id) for q in (node_hooks._OUTSTANDING_ON, node_hooks._STOPS_ON, node_hooks._ASSIGNED_ON)]
    for ids in (nodes, nodes[1:], [nodes[2]], []):
        runs.append((ledger._LENDERS, ids))
    runs += [(ledger._ROW, attempt_id) for attempt_id in [*attempts, 10**9]]
    for attempt_id in [*attempts, 10**9]:
        runs += [(q, attempt_id) for q in (fencing._JOB_LOCKED, fencing._ATTEMPT_LOCKED, fencing._WITH_JOB)]
        runs.append((fencing._WITH_JOB_LOCKED, attempt_id))
        runs += [
            (logstore._VERSION, attempt_id),
            (logstore._HOT_BATCH, attempt_id, -1),
            (logstore._LAST_HOT, attempt_id),
        ]
        runs += [(logstore._HOT, attempt_id, after) for after in (-1, 1)]

    read_rows = set()
    for project_id in [*projects, 10**9]:
        runs.append((usage._QUOTA, project_id))
        for resources in (["cpu_core_seconds"], ["cpu_core_seconds", "gpu_seconds"]):
            for start, end in ((today, today + timedelta(days=1)), (today - timedelta(days=40), today)):
                runs.append((quota_selectors._LEDGER_SUMS, project_id, start, end, resources))
    for prefix in [*ApiKey.objects.values_list("prefix", flat=True), "nosuchprefix"]:
        runs.append((quota_services._KEY, prefix))
    for job_id in [*jobs, 10**9]:
        for project_id in projects:
            runs += [
                (q, project_id, job_id) for q in (selectors._JOB, *selectors._RELATED.values(), logs_api._PROGRESS)
            ]
    for prepared, *args in runs:
        _same(prepared, *args)
        if prepared(*args):
            read_rows.add(prepared)
    project_made = {p for p in Prepared.made if not p.build.__module__.startswith("tests.")}
    assert project_made == {run[0] for run in runs}, "a prepared query without a case here"
    # The world has rows for each: a query that read nothing here would have compared nothing.
    assert read_rows == project_made, [
        (p.build.__module__, p.build.__code__.co_firstlineno) for p in project_made - read_rows
    ]


def test_a_prepared_query_runs_its_statement_without_the_orm_building_it_again(world):
    from jobs.models import Job

    query = Prepared(lambda ids, state: Job.objects.filter(pk__in=ids, state=state).values_list("pk", flat=True))
    assert query(world["jobs"], "queued") == list(
        Job.objects.filter(pk__in=world["jobs"], state="queued").values_list("pk", flat=True)
    )
    with CaptureQueriesContext(connection) as ran:
        again = query(world["jobs"][:1] + world["jobs"][1:], "queued")
    assert len(ran.captured_queries) == 1
    assert again == list(Job.objects.filter(pk__in=world["jobs"], state="queued").values_list("pk", flat=True))
    assert len(query._plans) == 1  # the same shape: the same statement


def test_arguments_of_each_kind_and_shape(world):
    from jobs.models import Attempt, Job

    by_time = Prepared(lambda t: Job.objects.filter(created_at__lt=t).order_by("pk").values_list("pk", "created_at"))
    later = timezone.now() + timedelta(seconds=1)
    assert by_time(later) == list(by_time.build(later))
    assert by_time(later - timedelta(days=1)) == []

    states = Prepared(lambda names: Job.objects.filter(state__in=names).order_by("pk").values_list("pk", "state"))
    for names in (["queued"], ["queued", "assigned", "running"], ("queued", "queued"), []):
        assert states(names) == list(states.build(list(names)))
    assert len(states._plans) == 3  # a statement per length: 1, 3, 1 again (duplicates read once), 0

    either = Prepared(
        lambda ids, names: (Job.objects.filter(pk__in=ids) | Job.objects.filter(name__in=names)).values_list("pk")
    )
    assert sorted(either([], ["a0", "g"])) == sorted(either.build([], ["a0", "g"]))
    assert either([], []) == []

    names = ["queued", *(f"state-{i}" for i in range(80))]
    assert states(names) == list(states.build(names)) and len(states._plans) == 3  # past MAX_ITEMS: the ORM, no plan
    many = [*world["jobs"], *range(10**9, 10**9 + 80)]
    by_ids = Prepared(lambda ids: Job.objects.filter(pk__in=ids).order_by("pk").values_list("pk", flat=True))
    assert by_ids(many) == sorted(world["jobs"]) and by_ids._plans == {}

    json_and_times = Prepared(lambda: Attempt.objects.order_by("pk").values_list("gpu_uuids", "started_at", "node_id"))
    assert json_and_times() == list(json_and_times.build())


def test_model_instances_with_their_related_ones_as_the_orm_makes_them(world):
    from django.db import transaction

    from jobs.models import Attempt, Job

    related = Prepared(
        lambda ids: (
            Attempt.objects.select_related("job", "job__array").defer("job__env").filter(pk__in=ids).order_by("pk")
        )
    )
    got, want = related(world["attempts"]), list(related.build(world["attempts"]))
    assert [_fields(a) for a in got] == [_fields(a) for a in want] and len(got) == len(world["attempts"])
    assert [_fields(a.job) for a in got] == [_fields(a.job) for a in want]
    assert any(a.job.array_id and a.job.array.count == 2 for a in got)  # the array, selected with its task
    assert all(not a._state.adding and a._state.db == "default" for a in got)
    assert "env" not in got[0].job.__dict__  # deferred, as the ORM's: read on access
    assert got[0].job.env == want[0].job.env

    locked = Prepared(lambda pk: Job.objects.select_for_update(of=("self",)).defer("env").filter(attempts__pk=pk)[:1])
    with transaction.atomic():
        job = locked(world["attempts"][0])[0]
    assert _fields(job) == _fields(Job.objects.defer("env").get(attempts__pk=world["attempts"][0]))
    job.name = "renamed"
    job.save(update_fields=["name"])  # an instance the ORM can save, as its own
    assert Job.objects.get(pk=job.pk).name == "renamed"


def test_a_build_that_does_not_pass_its_arguments_through_is_refused():
    from jobs.models import Job

    shifted = Prepared(lambda n: Job.objects.filter(pk=n + 1).values_list("pk"))
    with pytest.raises(ValueError, match="does not pass its arguments"):
        shifted(3)
    prefetching = Prepared(lambda n: Job.objects.filter(pk=n).prefetch_related("attempts"))
    with pytest.raises(TypeError, match="prefetches nothing"):
        prefetching(3)
    with pytest.raises(TypeError, match="values_list"):
        Prepared(lambda n: Job.objects.filter(pk=n).values("pk"))(3)
    with pytest.raises(TypeError):
        Prepared(lambda flag: Job.objects.filter(has_env=flag).values_list("pk"))(True)


def test_a_jobs_read_sets_its_related_rows_as_prefetch_related_does(world, project):
    from jobs import selectors
    from jobs.api.serializers import JobDetailSerializer
    from tests.jobs.reference import job_read_by_orm

    for job_id in world["jobs"][:3] + world["jobs"][-1:]:
        want = job_read_by_orm(project, job_id)
        job = selectors.job_get(project=project, job_id=job_id)
        with CaptureQueriesContext(connection) as ran:
            got = JobDetailSerializer(job).data
            attempts = list(job.attempts.all())
        assert ran.captured_queries == []  # everything the detail shows was read with the job
        assert got == JobDetailSerializer(want).data
        assert all(a.job is job for a in attempts)  # each attempt's job is the one read, as a prefetch leaves it
        # A further filter on the prefetched relation is still the job's own rows, read from the database.
        assert list(job.events.all().filter(to_state="queued")) == list(want.events.all().filter(to_state="queued"))
    with pytest.raises(NotFound):
        selectors.job_get(project=project, job_id=world["jobs"][3])  # the other project's


def test_a_rows_writes_are_those_of_save(world):
    from django.db import DatabaseError

    from euler import writes
    from jobs.models import Job, JobEvent

    def row(job_id: int) -> dict:
        return Job.objects.filter(pk=job_id).values().get()

    a, b = (Job.objects.defer("env").get(pk=pk) for pk in world["jobs"][:2])
    later = timezone.now() + timedelta(hours=1)
    for job, write in ((a, writes.update_fields), (b, lambda obj, names: obj.save(update_fields=names))):
        before = row(job.pk)["updated_at"]
        job.state, job.exit_code, job.reason, job.not_before, job.current_attempt = "failed", 3, "x", later, None
        job.node_selector = {"zone": "b"}
        write(job, ["state", "updated_at", "exit_code", "reason", "not_before", "current_attempt", "node_selector"])
        assert row(job.pk)["updated_at"] > before  # auto_now, as save() sets it
    fields = ("state", "exit_code", "reason", "not_before", "current_attempt_id", "node_selector", "updated_at")
    assert {k: row(a.pk)[k] for k in fields[:-1]} == {k: row(b.pk)[k] for k in fields[:-1]}
    assert row(a.pk)["updated_at"] == a.updated_at  # the instance holds what was written, as after save()

    gone = Job.objects.defer("env").get(pk=world["jobs"][2])
    Job.objects.filter(pk=gone.pk).delete()
    with pytest.raises(DatabaseError, match="did not affect any rows"):
        writes.update_fields(gone, ["state"])

    writes.insert(JobEvent(job=a, from_state="queued", to_state="failed", reason="r", message="m"))
    JobEvent.objects.create(job=b, from_state="queued", to_state="failed", reason="r", message="m")
    mine, theirs = (JobEvent.objects.filter(job=j).order_by("-id").values().first() for j in (a, b))
    assert mine["created_at"] is not None and mine["attempt_id"] is None
    drop = ("id", "job_id", "created_at")
    assert {k: v for k, v in mine.items() if k not in drop} == {k: v for k, v in theirs.items() if k not in drop}
    before = JobEvent.objects.filter(job=a).count()
    writes.insert(*(JobEvent(job=a, from_state="queued", to_state="assigned", message=f"m{i}") for i in range(3)))
    assert list(JobEvent.objects.filter(job=a).order_by("id").values_list("message", flat=True))[before:] == [
        "m0",
        "m1",
        "m2",
    ]
    with pytest.raises(TypeError, match="one model"):
        writes.insert(JobEvent(job=a, from_state="", to_state="x"), Job(project_id=a.project_id))


def test_a_conditional_update_is_that_of_queryset_update(world):
    from euler import writes
    from jobs.models import Attempt

    a, b = world["attempts"][2], world["attempts"][3]  # assigned, not yet running
    now = timezone.now()
    values = {"state": "running", "started_at": now, "container_id": "c1", "gpu_stats": [{"i": 1}], "exit_code": None}
    assert writes.update_where(Attempt, a, values, state="assigned") == 1
    assert Attempt.objects.filter(pk=b, state="assigned").update(**values) == 1
    fields = ("state", "started_at", "container_id", "gpu_stats", "exit_code")
    assert Attempt.objects.filter(pk=a).values(*fields).get() == Attempt.objects.filter(pk=b).values(*fields).get()
    # The condition holds no longer: nothing changes, as the ORM's update answers 0.
    assert writes.update_where(Attempt, a, {"state": "failed"}, state="assigned") == 0
    assert writes.update_where(Attempt, a, {"state": "failed"}, state__in=["queued", "lost"]) == 0
    assert writes.update_where(Attempt, a, {"metered_until": now}, metered_until=None) == 1  # IS NULL
    assert writes.update_where(Attempt, a, {"metered_until": now}, metered_until=None) == 0
    later = now + timedelta(seconds=5)
    assert writes.update_where(Attempt, a, {"metered_until": later}, metered_until=now) == 1  # a datetime's equality
    assert writes.update_where(Attempt, a, {"state": "succeeded"}, state__in=["running", "assigned"]) == 1
    assert Attempt.objects.filter(pk=a).values_list("state", "metered_until").get() == ("succeeded", later)
    with pytest.raises(ValueError, match="equality and __in"):
        writes.update_where(Attempt, a, {"state": "x"}, started_at__lt=now)


def test_an_addition_to_matching_rows_is_that_of_an_f_update(world, project, other_project):
    from django.db.models import F

    from euler import writes
    from quotas.models import UsageEntry

    today = timezone.now().date()
    rows = {
        p.pk: UsageEntry.objects.create(project=p, day=today, resource="gpu_seconds", agent_name="chat", amount=1.5)
        for p in (project, other_project)
    }
    where = {"day": today, "resource": "gpu_seconds", "agent_name": "chat"}
    assert writes.update_where(UsageEntry, None, {}, add={"amount": 2.25}, project_id=project.pk, **where) == 1
    UsageEntry.objects.filter(project=other_project, **where).update(amount=F("amount") + 2.25)
    assert [UsageEntry.objects.get(pk=r.pk).amount for r in rows.values()] == [3.75, 3.75]
    assert writes.update_where(UsageEntry, None, {}, add={"amount": 1.0}, project_id=10**9, **where) == 0
