"""Job arrays and dependent jobs: submit (one transaction, one bulk insert), cancel and retry of a whole array or
one index, and the array's aggregate. The API, console and CLI call these; states move in jobs.transitions."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

import audit
from euler.errors import Conflict, NotFound
from jobs import deps, priorityclasses, transitions, usage, workflow
from jobs.models import Job, JobEvent
from jobs.outputs.inputs import check_inputs
from jobs.states import ATTEMPT_ACTIVE, TERMINAL, JobState
from jobs.wakeups import schedule_on_commit
from jobs.workflow_models import JobArray
from quotas import scoped


def submit_waiting(*, project, spec: dict, depends_on: list[dict], by=None) -> Job:
    """A single job with dependencies: `waiting` until they are met, then queued; cancelled `dependency_failed`
    at once when one already ended so that it never can be."""
    env = spec.pop("env", None) or None
    now = timezone.now()
    job = Job.objects.create(
        project=project, env=env, has_env=bool(env), created_by=by, queued_at=now, state=JobState.WAITING, **spec
    )
    transitions.created(job)
    verdict, reason = deps.attach(waiter=("job", job.pk), project=project, depends_on=depends_on)
    if verdict == workflow.MET:
        transitions.move(job, JobState.QUEUED, why="dependencies_met", note="its dependencies are met", now=now)
        schedule_on_commit()
    elif verdict == workflow.NEVER:
        note = "a dependency already ended and can never be met"
        transitions.move(job, JobState.CANCELLED, why="dependency_failed", note=note, reason="dependency_failed")
    else:
        scoped.jobs(project=project).filter(pk=job.pk).update(pending_reason=reason)
    return job


@transaction.atomic
def array_submit(*, project, spec: dict, array: dict, depends_on: list[dict], by=None) -> JobArray:
    """N tasks of one spec in one transaction: the array row, N job rows and N events in bulk inserts. The lowest
    `parallelism` indices start queued, the rest waiting (the scheduler never reads them); all wait while the
    array's own dependencies are unmet."""
    usage.check_budget(project=project, gpu_count=spec.get("gpu_count", 0))
    check_inputs(project=project, inputs=spec.get("inputs_from") or [])  # as a single job's: 404 for another's
    priorityclasses.apply(project=project, spec=spec)
    count, parallelism = array["count"], array.get("parallelism")
    env = spec.pop("env", None) or None
    arr = JobArray.objects.create(
        project=project, name=spec["name"], count=count, parallelism=parallelism, held=bool(depends_on), created_by=by
    )
    reason = ""
    if depends_on:
        verdict, reason = deps.attach(waiter=("array", arr.pk), project=project, depends_on=depends_on)
        arr.held = verdict != workflow.MET
        if not arr.held:
            scoped.arrays(project=project).filter(pk=arr.pk).update(held=False)
        if verdict == workflow.NEVER:
            reason = "a dependency already ended and can never be met"
    now = timezone.now()
    queued = workflow.initially_queued(count=count, parallelism=parallelism, held=arr.held)
    slot_reason = workflow.parallelism_reason(arr.pk, parallelism) if parallelism else ""
    template = Job(project=project, env=env, has_env=bool(env), created_by=by, queued_at=now, array=arr, **spec)
    template.created_at = template.updated_at = now
    insert_tasks(template, count=count, queued=queued, waiting_reason=reason or slot_reason, now=now)
    if arr.held and reason.startswith("a dependency already ended"):
        rows = list(Job.objects.select_for_update().filter(array=arr).defer("env").order_by("pk"))
        transitions.end_many(rows, why="dependency_failed", note=reason, now=now)
    elif queued:
        schedule_on_commit()
    return arr


def insert_tasks(template: Job, *, count: int, queued: int, waiting_reason: str, now) -> None:
    """The array's N task rows and their first events in two INSERT … SELECT statements over a generated series:
    the spec's values are sent once (env encrypted once), the database makes the rows, so a 10,000-task array
    costs two statements rather than 10,000 rows of Python values (Django's bulk_create)."""
    from django.db import connection

    names = {"id", "array_index", "state", "pending_reason"}
    columns = [f for f in Job._meta.concrete_fields if f.column not in names]
    params: list = [count]
    values = []
    for f in columns:
        value = f.get_db_prep_save(f.pre_save(template, add=True), connection)
        # PostgreSQL types a bare parameter from its text; SQLite keeps what it is given (its CAST would turn a
        # datetime's text into a number).
        values.append(f"CAST(%s AS {f.db_type(connection)})" if connection.vendor == "postgresql" else "%s")
        params.append(value)
    params += [queued, JobState.QUEUED, JobState.WAITING, queued, waiting_reason]
    quote = connection.ops.quote_name
    table = quote(Job._meta.db_table)
    series = (
        "WITH g(i) AS (SELECT generate_series(0, %s - 1)) "
        if connection.vendor == "postgresql"
        else "WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < %s) "
    )
    with connection.cursor() as cur:
        cur.execute(
            series
            + f"INSERT INTO {table} ({', '.join(quote(f.column) for f in columns)}, array_index, state, pending_reason) "
            f"SELECT {', '.join(values)}, i, CASE WHEN i < %s THEN %s ELSE %s END, "
            "CASE WHEN i < %s THEN '' ELSE %s END FROM g",
            params,
        )
        cur.execute(
            f"INSERT INTO {quote(JobEvent._meta.db_table)} (job_id, from_state, to_state, reason, message, created_at) "
            f"SELECT id, '', state, '', %s, %s FROM {table} WHERE array_id = %s",
            [f"submitted: task of array {template.array_id}", now, template.array_id],
        )


def array_get(*, project, array_id) -> JobArray:
    return scoped.array(project=project, array_id=array_id)


def _task_ids(arr: JobArray, index: int | None):
    if index is None:
        return Job.objects.filter(array=arr)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < arr.count:
        raise NotFound(f"Array {arr.pk} has no task {index!r}.")
    return Job.objects.filter(array=arr, array_index=index)


@transaction.atomic
def array_cancel(*, project, array_id, index: int | None = None, by=None) -> JobArray:
    """Cancel every task that has not ended (or one index): at once for waiting and queued ones; a running one's
    node is told to stop its container."""
    arr = array_get(project=project, array_id=array_id)
    tasks = list(_task_ids(arr, index).select_for_update().exclude(state__in=TERMINAL).defer("env").order_by("pk"))
    if index is not None and not tasks:
        raise Conflict(f"Task {index} of array {arr.pk} has ended already.", code="invalid_transition")
    transitions.end_many(tasks, why="cancelled", note="cancelled by user")
    target = f"array:{arr.pk}" if index is None else f"array:{arr.pk}[{index}]"
    audit.record("job.cancelled", project=project, target=target, details={"tasks": len(tasks)}, by=by)
    return arr


@transaction.atomic
def array_retry(*, project, array_id, index: int | None = None, by=None) -> JobArray:
    """Every task that ended without success (or one ended index, whatever its end) waits again for a slot, with
    its automatic retries renewed; the array's parallelism still holds."""
    arr = array_get(project=project, array_id=array_id)
    if deps.failed_dependency(array_id=arr.pk):
        raise Conflict("A dependency of this array can never be met.", code="dependency_failed")
    qs = _task_ids(arr, index).select_for_update().filter(state__in=TERMINAL)
    if index is None:
        qs = qs.exclude(state=JobState.SUCCEEDED)
    tasks = list(qs.defer("env").order_by("pk"))
    if index is not None and not tasks:
        raise Conflict(f"Only an ended task can be retried; task {index} has not ended.", code="invalid_transition")
    stopping = scoped.attempts(project=project).filter(
        pk__in=[t.current_attempt_id for t in tasks if t.current_attempt_id], state__in=ATTEMPT_ACTIVE
    )
    if stopping.exists():
        raise Conflict("A previous attempt is still being stopped; retry in a few seconds.", code="attempt_stopping")
    requeue_tasks(arr, tasks, note="retried by user")
    audit.record("job.retried", project=project, target=f"array:{arr.pk}", details={"tasks": len(tasks)}, by=by)
    return arr


def requeue_tasks(arr: JobArray, tasks: list[Job], *, note: str) -> None:
    """Ended tasks back to waiting for their array's slots (locked tasks; the array is locked here)."""
    now = timezone.now()
    arr = scoped.arrays(project=arr.project_id).select_for_update().get(pk=arr.pk)
    reason = workflow.parallelism_reason(arr.pk, arr.parallelism) if arr.parallelism else ""
    for task in tasks:
        transitions.move(
            task, JobState.WAITING, why="retry", note=note, now=now, current_attempt=None, retries_used=0,
            not_before=None, exit_code=None, reason="", ended_at=None, pending_reason=reason,
        )  # fmt: skip
    transitions.admit(arr, now=now)


def refill(*, now=None) -> int:
    """Backstop (the sweep): arrays with waiting tasks and no dependency holding them get their free slots filled.
    A task ending releases the next one in its own transaction; this catches a release skipped over a row lock
    (SKIP LOCKED). Reads only arrays that have waiting tasks (the array/state index)."""
    now = now or timezone.now()
    ids = list(
        Job.objects.filter(array__isnull=False, state=JobState.WAITING, array__held=False)
        .values_list("array_id", flat=True)
        .distinct()
    )
    released = 0
    for array_id in ids:
        with transaction.atomic():
            arr = JobArray.objects.select_for_update(skip_locked=True).filter(pk=array_id).first()
            if arr is not None:
                released += transitions.admit(arr, now=now)
    return released
