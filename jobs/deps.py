"""Dependencies in the database: checking and recording them at submit, and the verdicts when what they wait on
ends. Reads and Dependency rows only; job states change in jobs.transitions, which calls `settle`."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models import Count, QuerySet

from euler.errors import InvalidInput
from euler.prepared import Prepared
from jobs import workflow
from jobs.models import Job
from jobs.workflow_models import Dependency, DepState, JobArray
from quotas import scoped

Node = workflow.Node


def counts_of(array_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Tasks per state for each array, in one grouped query over the (array, state) index."""
    ids = list(array_ids)
    rows: dict[int, list] = {aid: [] for aid in ids}
    for aid, state, n in (
        Job.objects.filter(array_id__in=ids).values("array_id", "state").annotate(n=Count("id")).order_by()
    ).values_list("array_id", "state", "n"):
        rows[aid].append((state, n))
    return {aid: workflow.full_counts(r) for aid, r in rows.items()}


def _lock_share(rows: QuerySet, ids: list[int], columns: tuple[str, ...]) -> dict[int, tuple]:
    """The project's rows (from quotas.scoped) among `ids`, FOR SHARE: an ending that races this submit either
    committed before (its state is read here) or waits until the new dependency rows are committed (and then
    settles them). Django has no FOR SHARE: the queryset's own SQL is run with the clause added."""
    if not ids:
        return {}
    sql, params = rows.filter(pk__in=ids).order_by("pk").values_list("pk", *columns).query.sql_with_params()
    if connection.vendor == "postgresql":
        sql += " FOR SHARE"
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return {row[0]: row for row in cur.fetchall()}


def parents(nodes: set[Node]) -> dict[Node, list[Node]]:
    """What each node waits for: its dependencies and, for an array task, its array (for workflow.find_cycle)."""
    out: dict[Node, list[Node]] = {node: [] for node in nodes}
    jobs = [i for kind, i in nodes if kind == "job"]
    arrays = [i for kind, i in nodes if kind == "array"]
    deps = Dependency.objects.filter(job_id__in=jobs) | Dependency.objects.filter(array_id__in=arrays)
    for job_id, array_id, on_job, on_array in deps.values_list("job_id", "array_id", "on_job_id", "on_array_id"):
        waiter = ("job", job_id) if job_id else ("array", array_id)
        out[waiter].append(("job", on_job) if on_job else ("array", on_array))
    for job_id, array_id in Job.objects.filter(pk__in=jobs, array__isnull=False).values_list("pk", "array_id"):
        out[("job", job_id)].append(("array", array_id))
    return out


def attach(*, waiter: Node, project, depends_on: list[dict]) -> tuple[str, str]:
    """Record `waiter`'s dependencies (validated by jobs.validation.depends_on) and say where it stands:
    (verdict, pending reason). 404 for a job or array not in the project; 400 dependency_cycle for a cycle."""
    job_ids = [d["job"] for d in depends_on if "job" in d]
    array_ids = [d["array"] for d in depends_on if "array" in d]
    jobs = _lock_share(scoped.jobs(project=project), job_ids, ("state", "reason"))
    arrays = _lock_share(scoped.arrays(project=project), array_ids, ("count", "held"))
    for i in job_ids:
        if i not in jobs:
            raise scoped.missing("job", i, "depends_on")
    for i in array_ids:
        if i not in arrays:
            raise scoped.missing("array", i, "depends_on")
    targets = [("job", d["job"]) if "job" in d else ("array", d["array"]) for d in depends_on]
    cycle = workflow.find_cycle(waiter, targets, parents)
    if cycle:
        raise InvalidInput(
            "depends_on makes a cycle: " + " → ".join(workflow.describe(n) for n in cycle) + ".",
            code="dependency_cycle",
        )
    counts = counts_of(array_ids)
    rows, verdicts, waits = [], [], []
    for dep, (kind, target) in zip(depends_on, targets, strict=True):
        cond = dep.get("condition", "succeeded")
        if kind == "job":
            verdict = workflow.job_verdict(cond, jobs[target][1], jobs[target][2])
        else:
            broken = failed_dependency(array_id=target)
            verdict = workflow.array_verdict(cond, counts[target], arrays[target][1], broken=broken)
        verdicts.append(verdict)
        if verdict == workflow.PENDING:
            waits.append(((kind, target), cond))
        rows.append(
            Dependency(
                job_id=waiter[1] if waiter[0] == "job" else None,
                array_id=waiter[1] if waiter[0] == "array" else None,
                on_job_id=target if kind == "job" else None,
                on_array_id=target if kind == "array" else None,
                condition=cond,
                state=verdict,
            )
        )
    Dependency.objects.bulk_create(rows)
    if workflow.NEVER in verdicts:
        return workflow.NEVER, ""
    return (workflow.PENDING, workflow.pending_reason(waits)) if waits else (workflow.MET, "")


def _pending_on(job_ids, array_ids) -> QuerySet:
    """The pending dependencies on these jobs or arrays."""
    pending = Dependency.objects.filter(state=DepState.PENDING)
    return pending.filter(on_job_id__in=job_ids) | pending.filter(on_array_id__in=array_ids)


_ANY_PENDING_ON = Prepared(lambda job_ids, array_ids: _pending_on(job_ids, array_ids).values_list("pk")[:1])


def settle(*, job_ids: set[int], array_ids: set[int]) -> tuple[list[Node], list[Node]]:
    """Jobs (and arrays whose tasks) just ended, inside the ending's transaction (arrays locked by the caller):
    record the verdicts of the pending dependencies on them; answer the waiters that can never run and the
    waiters with nothing left to wait for."""
    if not _ANY_PENDING_ON(job_ids, array_ids):  # the usual end: nothing waits on it (one compiled read)
        return [], []
    rows = list(
        _pending_on(job_ids, array_ids)
        .select_related("on_job")
        .only("id", "job_id", "array_id", "on_job__state", "on_job__reason", "on_array_id", "condition", "state")
    )
    if not rows:
        return [], []
    counts = counts_of({r.on_array_id for r in rows if r.on_array_id})
    sizes = dict(JobArray.objects.filter(pk__in=counts).values_list("pk", "count"))
    by_verdict: dict[str, list[int]] = {workflow.MET: [], workflow.NEVER: []}
    never, touched = [], []
    for r in rows:
        if r.on_job_id:
            verdict = workflow.job_verdict(r.condition, r.on_job.state, r.on_job.reason)
        else:
            broken = failed_dependency(array_id=r.on_array_id)
            verdict = workflow.array_verdict(r.condition, counts[r.on_array_id], sizes[r.on_array_id], broken=broken)
        if verdict == workflow.PENDING:
            continue
        by_verdict[verdict].append(r.pk)
        waiter = ("job", r.job_id) if r.job_id else ("array", r.array_id)
        (never if verdict == workflow.NEVER else touched).append(waiter)
    for verdict, ids in by_verdict.items():
        if ids:
            Dependency.objects.filter(pk__in=ids).update(state=verdict)
    never_set = set(never)
    ready = [w for w in dict.fromkeys(touched) if w not in never_set and not _still_waits(w)]
    return list(dict.fromkeys(never)), ready


def _still_waits(waiter: Node) -> bool:
    kind, i = waiter
    qs = Dependency.objects.filter(job_id=i) if kind == "job" else Dependency.objects.filter(array_id=i)
    return qs.exclude(state=DepState.MET).exists()


def reason_for(waiter: Node) -> str:
    """The pending reason of a waiter from its dependencies still pending."""
    kind, i = waiter
    qs = Dependency.objects.filter(job_id=i) if kind == "job" else Dependency.objects.filter(array_id=i)
    waits = []
    for on_job, on_array, cond in qs.filter(state=DepState.PENDING).values_list(
        "on_job_id", "on_array_id", "condition"
    ):
        waits.append((("job", on_job) if on_job else ("array", on_array), cond))
    return workflow.pending_reason(waits)


def failed_dependency(*, job_id: int | None = None, array_id: int | None = None) -> bool:
    """Whether the job or the array has a dependency that can never be met (then it is not retried)."""
    qs = Dependency.objects.filter(state=DepState.NEVER)
    return (qs.filter(job_id=job_id) if job_id else qs.none()).exists() or (
        qs.filter(array_id=array_id).exists() if array_id else False
    )
