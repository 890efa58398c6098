"""`euler arrays VERB`: list (default), show, tasks, cancel, retry, wait. `euler run --array N` makes one."""

from __future__ import annotations

import click

from euler_client.cli.base import NounGroup, json_option, pass_state
from euler_client.cli.output import emit_json, fields, fmt_time, note, table

ORDER = ("succeeded", "failed", "lost", "cancelled", "running", "assigned", "queued", "waiting")


def counts_line(a: dict) -> str:
    """ "7/10 succeeded, 1 failed, 2 running" (the states with tasks, in ORDER)."""
    c = a.get("counts") or {}
    done = f"{c.get('succeeded', 0)}/{a.get('count')} succeeded"
    rest = [f"{c[s]} {s}" for s in ORDER[1:] if c.get(s)]
    return ", ".join([done, *rest])


def dependency_text(d: dict) -> str:
    target = f"job {d['job']}" if d.get("job") else f"array {d.get('array')}"
    return f"{target} {d.get('condition')} ({d.get('state')})"


@click.command("list")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@json_option
@pass_state
def arrays_list(state, limit, as_json):
    """The project's job arrays, newest first, with their progress."""
    items = state.client().arrays.list(limit=limit)
    if as_json:
        return emit_json(items)
    table(["ID", "NAME", "STATE", "TASKS", "PARALLELISM", "CREATED", "PROGRESS"],
          [[a["id"], a.get("name"), a.get("state"), a.get("count"), a.get("parallelism") or "",
            fmt_time(a.get("created_at")), counts_line(a)] for a in items])  # fmt: skip


@click.command("show")
@json_option
@click.argument("array_id", type=int)
@pass_state
def arrays_show(state, as_json, array_id):
    """One array: its state, counts per task state and dependencies."""
    a = state.client().arrays.get(array_id)
    if as_json:
        return emit_json(a)
    fields([
        ("id", a["id"]), ("name", a.get("name")), ("state", a.get("state")), ("tasks", a.get("count")),
        ("parallelism", a.get("parallelism") or "no limit"), ("progress", counts_line(a)),
        ("pending", a.get("pending_reason")), ("depends on", "; ".join(dependency_text(d) for d in a.get("depends_on") or [])),
        ("created", fmt_time(a.get("created_at"))),
    ])  # fmt: skip


@click.command("tasks")
@click.option("--state", "task_state", metavar="STATE[,STATE]", help="waiting, queued, running, failed, ...")
@click.option("--limit", type=click.IntRange(1, 100000), default=100, show_default=True)
@json_option
@click.argument("array_id", type=int)
@pass_state
def arrays_tasks(state, task_state, limit, as_json, array_id):
    """The array's tasks by index (each a job: `euler logs JOB`)."""
    items = state.client().arrays.tasks(array_id, state=task_state, limit=limit)
    if as_json:
        return emit_json(items)
    table(["INDEX", "JOB", "STATE", "EXIT", "DETAIL"],
          [[t.get("array_index"), t["id"], t.get("state"), t.get("exit_code"),
            t.get("pending_reason") or t.get("reason") or ""] for t in items])  # fmt: skip


def _steer(verb: str):
    @click.command(verb)
    @click.option("--index", type=click.IntRange(0), help="Only this task (default: the whole array).")
    @json_option
    @click.argument("array_id", type=int)
    @pass_state
    def command(state, index, as_json, array_id):
        a = getattr(state.client().arrays, verb)(array_id, index=index)
        emit_json(a) if as_json else click.echo(f"{a['id']} {a.get('state')}: {counts_line(a)}")
        return 0

    command.__doc__ = {
        "cancel": "Cancel every task not yet ended (or one --index); running ones are stopped.",
        "retry": "Run again every task that ended without success (or one ended --index).",
    }[verb]
    return command


@click.command("wait")
@json_option
@click.argument("array_id", type=int)
@pass_state
def arrays_wait(state, as_json, array_id):
    """Wait until every task ended (progress on stderr); exit 0 when all succeeded, else 1."""
    ended = state.client().arrays.wait(array_id, on_change=lambda a: note(f"array {a['id']}: {counts_line(a)}"))
    emit_json(ended) if as_json else click.echo(f"{array_id} {ended.get('state')}: {counts_line(ended)}")
    return 0 if ended.get("state") == "succeeded" else 1


arrays = NounGroup("arrays", "Job arrays: list (the default), show, tasks, cancel, retry, wait.")
for _command in (arrays_list, arrays_show, arrays_tasks, _steer("cancel"), _steer("retry"), arrays_wait):
    arrays.add_command(_command)
