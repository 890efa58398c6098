"""Every id or name that a caller supplies resolves through one project-scoped door, quotas/scoped.py.

Three walks keep it so, for the next feature too:
- the code: an AST scan of the server apps for a lookup by id or name on a tenant model's manager
  (`Job.objects.get(pk=…)`, `.filter(id__in=…)`, `Agent.objects.filter(name=…)`) outside the door. The modules that
  never see a caller's id (the node protocol, background work) and a few reviewed functions are listed below,
  each with its reason; anything else found fails, so a new view, service or selector cannot forget the scope;
- the door itself: each of its querysets starts with a filter on the project (remove one and this fails);
- the door's functions, run: each one, given project beta and one of alpha's ids or names, finds nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOOR = "quotas/scoped.py"
APPS = ("jobs", "quotas", "agents", "gateway", "workflows", "console", "audit", "nodes", "services")

# The models a caller names by id or name (in a URL, a body or a query string), and their children reached by id.
TENANT_MODELS = frozenset(
    {
        "Job",
        "JobArray",
        "Attempt",
        "OutputFile",
        "Schedule",
        "Webhook",
        "Delivery",
        "Agent",
        "AgentInstance",
        "Checkpoint",
        "CheckpointBlob",
        "Service",
        "ServiceRevision",
        "Replica",
    }
)
MANAGERS = frozenset({"objects", "_default_manager", "_base_manager"})
LOOKUPS = frozenset({"get", "filter", "exclude", "get_or_create", "update_or_create", "in_bulk"})

# Modules that never receive an id from a caller: they act on rows the server itself selected.
NOT_CALLER_FACING = {
    "jobs/node_api/": "node protocol: a node names only its attempts, and jobs/fencing.py decides what it may touch",
    "jobs/fencing.py": "node protocol: the one place that decides a node's rights over an attempt",
    "jobs/attempts.py": "node protocol: reports on an attempt that jobs/fencing.py let through",
    "jobs/stopping.py": "stops: attempts its callers resolved (a scoped cancel, a node's reclaim, the scheduler)",
    "jobs/node_hooks.py": "node protocol: a node's poll and heartbeat, over its own attempts",
    "jobs/outputs/node_api.py": "node protocol: output uploads, fenced on the attempt",
    "jobs/outputs/services.py": "node protocol: a node's manifest and chunks, fenced on the attempt",
    "jobs/outputs/keepalive.py": "node protocol: an upload's deadline, fenced on the attempt",
    "jobs/checkpoints/services.py": "node protocol: a node's checkpoint manifest, blobs and commit, fenced on the attempt",
    "jobs/checkpoints/node_api.py": "node protocol: checkpoint routes, fenced on the attempt",
    "jobs/checkpoints/retention.py": "retention: rows past their age, all projects",
    "nodes/node_api/": "node protocol: a node's own row, by its credential",
    "jobs/scheduling/": "the control loop: queued rows it selected itself (its input gate is jobs/outputs/inputs.py)",
    "jobs/transitions.py": "the one writer of job state: rows its callers resolved and locked",
    "jobs/usage.py": "metering: attempts the server holds",
    "jobs/budgets.py": "budget enforcement: every project's running attempts",
    "jobs/logstore.py": "log storage: attempts already resolved by jobs/logs_api.py or the node protocol",
    "jobs/retention.py": "retention: rows past their age, all projects",
    "jobs/outputs/retention.py": "retention: rows past their age, all projects",
    "jobs/tasks.py": "Celery tasks: ids the server queued",
    "jobs/gauges.py": "metrics over all projects",
    "workflows/dispatch.py": "webhook dispatch: the job event stream, all projects",
    "workflows/delivery.py": "webhook delivery: a delivery the dispatcher queued",
    "workflows/tasks.py": "Celery tasks: ids the server queued",
    "agents/health.py": "health checks: every instance, all projects",
    "services/controller.py": "the services controller: every service and the replicas, jobs, instances it made",
    "services/scaling.py": "the services controller's autoscaler: a service the controller selected",
    "services/tasks.py": "Celery tasks: the controller's pass, all projects",
    "gateway/recorder.py": "the invocation recorder: rows the gateway resolved through quotas.scoped",
    "gateway/tasks.py": "pruning: all projects",
    "/management/commands/": "operator commands: all projects, by an operator",
    "/admin.py": "the Django admin: staff, all projects",
    "/migrations/": "schema history",
}

# Functions in caller-facing modules whose lookups take ids the server holds, never the caller's (reviewed).
ALLOWED = {
    "jobs/arrays.py:refill": "the sweep: arrays from its own query of waiting tasks",
    "jobs/deps.py:counts_of": "arrays its callers resolved (array_get, attach's scoped lock, the page they list)",
    "jobs/deps.py:parents": "the dependency graph walked from rows written by attach after the project check",
    "jobs/deps.py:settle": "what an ending releases: dependency rows written by attach after the project check",
    "jobs/checkpoints/selectors.py:blob_for_node": "node protocol: a blob of the job whose attempt jobs/fencing.py let "
    "through (filtered by that job)",
    "jobs/logs_api.py:attempt_active": "an attempt that log_target resolved in the caller's project",
    "jobs/logs_api.py:first_attempt_or_end": "a job that log_target resolved in the caller's project",
    "jobs/consumers.py:_attempt": "an attempt that a live message of the socket's own job named",
    "workflows/schedules.py:run_one": "the tick: a schedule that run_due selected, all projects",
}


def _module(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _exempt(module: str) -> bool:
    return any(module.startswith(p) or (p.startswith("/") and p in "/" + module) for p in NOT_CALLER_FACING)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _chain(start: ast.AST, parents: dict) -> tuple[list[str], set[str], bool]:
    """Climb a queryset chain from its manager: the keyword names of every call in it (Q(...) arguments too), the
    lookup methods called, and whether a lookup had a positional argument that is not a Q."""
    keys: list[str] = []
    methods: set[str] = set()
    positional = False
    node = start
    while True:
        up = parents.get(node)
        if isinstance(up, ast.Attribute) and up.value is node:
            node = up
            continue
        if isinstance(up, ast.Call) and up.func is node:
            method = node.attr if isinstance(node, ast.Attribute) else ""
            methods.add(method)
            keys += [k.arg for k in up.keywords if k.arg]
            for arg in up.args if method in LOOKUPS else ():
                qs = [c for c in ast.walk(arg) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "Q"]
                keys += [k.arg for q in qs for k in q.keywords if k.arg]
                positional = positional or not qs
            node = up
            continue
        return keys, methods, positional


def _names_an_id(key: str) -> bool:
    head = key.split("__")[0]
    return head in {"pk", "id", "name"} or head.endswith("_id")


def _names_the_project(key: str) -> bool:
    return "project" in key


def _function(node: ast.AST, parents: dict) -> str:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node.name
    return "<module>"


def unscoped_lookups(root: Path = ROOT) -> list[tuple[str, str, int, str]]:
    """(module, function, line, model) of each lookup by id or name on a tenant model outside the door."""
    found = []
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            module = path.relative_to(root).as_posix()
            if module == DOOR or _exempt(module):
                continue
            tree = ast.parse(path.read_text(), filename=module)
            parents = _parents(tree)
            for node in ast.walk(tree):
                if not (
                    isinstance(node, ast.Attribute)
                    and node.attr in MANAGERS
                    and isinstance(node.value, ast.Name)
                    and node.value.id in TENANT_MODELS
                ):
                    continue
                keys, methods, positional = _chain(node, parents)
                if not methods & LOOKUPS:
                    continue
                if positional or "in_bulk" in methods or any(_names_an_id(k) for k in keys):
                    found.append((module, _function(node, parents), node.lineno, node.value.id))
    return found


def unscoped_in_door(root: Path = ROOT) -> list[tuple[int, str]]:
    """Lines of the door where a model's rows are read without a filter on the project as the first step."""
    path = root / DOOR
    tree = ast.parse(path.read_text(), filename=DOOR)
    parents = _parents(tree)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in MANAGERS and isinstance(node.value, ast.Name):
            bad.append((node.lineno, f"{node.value.id}.{node.attr}: go through _objects(label).filter(project=…)"))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_objects":
            up, call = parents.get(node), parents.get(parents.get(node))
            first = isinstance(up, ast.Attribute) and up.attr == "filter" and isinstance(call, ast.Call)
            if not (first and any(k.arg and _names_the_project(k.arg) for k in call.keywords)):
                bad.append((node.lineno, f"{ast.unparse(call or node)[:100]}: the first filter names no project"))
    return bad


def test_no_lookup_by_a_callers_id_bypasses_the_project_scoped_door():
    found = [f for f in unscoped_lookups() if f"{f[0]}:{f[1]}" not in ALLOWED]
    assert not found, "lookups by id or name outside quotas/scoped.py (route them through it):\n" + "\n".join(
        f"  {module}:{line} in {function}(): {model}.objects…" for module, function, line, model in found
    )


def test_every_query_in_the_door_filters_by_the_project_first():
    bad = unscoped_in_door()
    assert not bad, "quotas/scoped.py reads rows without the project:\n" + "\n".join(
        f"  {DOOR}:{line}: {why}" for line, why in bad
    )


def test_the_lists_of_exceptions_hold_no_stale_entry():
    hits = {f"{module}:{function}" for module, function, _, _ in unscoped_lookups()}
    stale = sorted(set(ALLOWED) - hits)
    assert not stale, f"these ALLOWED functions no longer look anything up by id (remove them): {stale}"
    modules = {p.relative_to(ROOT).as_posix() for app in APPS for p in (ROOT / app).rglob("*.py")}
    gone = sorted(p for p in NOT_CALLER_FACING if not p.startswith("/") and not any(m.startswith(p) for m in modules))
    assert not gone, f"these NOT_CALLER_FACING modules no longer exist: {gone}"


def test_the_scan_sees_what_it_is_meant_to_see(tmp_path):
    """The walk itself, on a made-up app: an unscoped get, an id__in and a name in a Q are found, and so is a lookup
    that names the project but bypasses the door (one door); a filter by a resolved parent or a list is not."""
    app = tmp_path / "jobs"
    app.mkdir()
    (app / "views.py").write_text(
        "def a(job_id):\n    return Job.objects.get(pk=job_id)\n"
        "def b(ids):\n    return Job.objects.select_for_update().filter(id__in=ids, state='queued').first()\n"
        "def c(name):\n    return Agent.objects.filter(Q(name=name))\n"
        "def d(project, job_id):\n    return Job.objects.filter(project=project).get(pk=job_id)\n"
        "def e(job):\n    return OutputFile.objects.filter(job=job, complete=True)\n"
        "def f(project):\n    return Job.objects.filter(project=project).count()\n"
    )
    found = {(function, model) for _, function, _, model in unscoped_lookups(tmp_path)}
    assert found == {("a", "Job"), ("b", "Job"), ("c", "Agent"), ("d", "Job")}


# --- the door's functions, run against another project's objects -----------------------------------------------
QUERYSETS = ("jobs", "arrays", "attempts", "outputs", "schedules", "webhooks", "deliveries", "agents", "instances")
ALPHA_IDS = {
    "jobs": "job_id", "arrays": "array_id", "attempts": "attempt_id", "outputs": "output_id", "schedules": "schedule",
    "webhooks": "hook_id", "deliveries": "delivery_id", "agents": "name", "instances": "instance_id",
}  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("queryset", QUERYSETS)
def test_each_queryset_of_the_door_holds_its_projects_rows_only(queryset, alpha, project, other_project):
    from quotas import scoped

    key = ALPHA_IDS[queryset]
    lookup = {"name": "chat"} if key in ("schedule", "name") else {"pk": alpha[key]}
    rows = getattr(scoped, queryset)
    assert rows(project=project).filter(**lookup).exists()
    assert rows(project=project.pk).filter(**lookup).exists()  # a background read passes the project's id
    assert not rows(project=other_project).filter(**lookup).exists()


@pytest.mark.django_db
def test_each_resolver_of_the_door_answers_another_projects_id_as_a_missing_one(alpha, project, other_project):
    from euler.errors import NotFound
    from quotas import scoped
    from workflows.models import Webhook

    hook = Webhook.objects.get(pk=alpha["hook_id"])
    agent = scoped.agent(project=project, name="chat")
    beta_hook = Webhook.objects.create(project=other_project, url="http://127.0.0.1:9/b", events=["job.ended"],
                                       secret="s")  # fmt: skip
    beta_agent = other_project.agents.create(name="beta")
    resolvers = [
        (scoped.job, {"job_id": alpha["job_id"]}),
        (scoped.array, {"array_id": alpha["array_id"]}),
        (scoped.webhook, {"hook_id": alpha["hook_id"]}),
        (scoped.schedule, {"name": "chat"}),
        (scoped.agent, {"name": "chat"}),
    ]
    for resolve, kwargs in resolvers:
        assert resolve(project=project, **kwargs) is not None
        with pytest.raises(NotFound) as theirs:
            resolve(project=other_project, **kwargs)
        missing = {k: (987654321 if k.endswith("_id") else "nothing-here") for k in kwargs}
        with pytest.raises(NotFound) as none:
            resolve(project=other_project, **missing)
        (given,), (absent,) = kwargs.values(), missing.values()
        assert theirs.value.as_dict() == {  # the same answer, but for the id or name the caller sent
            k: v.replace(str(absent), str(given)) for k, v in none.value.as_dict().items()
        }
    assert scoped.delivery(hook=hook, delivery_id=alpha["delivery_id"])
    with pytest.raises(NotFound):
        scoped.delivery(hook=beta_hook, delivery_id=alpha["delivery_id"])
    assert scoped.instance(agent=agent, instance_id=alpha["instance_id"])
    with pytest.raises(NotFound):
        scoped.instance(agent=beta_agent, instance_id=alpha["instance_id"])
    for many, key in ((scoped.job_ids, "job_id"), (scoped.array_ids, "array_id")):
        assert many(project=project, ids=[alpha[key]], field="depends_on") == {alpha[key]}
        with pytest.raises(NotFound) as theirs:
            many(project=other_project, ids=[alpha[key]], field="depends_on")
        assert theirs.value.message.endswith(f": {alpha[key]} (depends_on).")
