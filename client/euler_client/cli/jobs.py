"""`euler jobs VERB`: list, show, run, logs, cancel, wait, retry (run, logs and cancel are also at the top)."""

from __future__ import annotations

import json
import sys

import click

from euler_client.cli.base import NounGroup, json_option, pass_state
from euler_client.cli.output import emit_json, fields, fmt_bytes, fmt_cpu, fmt_time, note, table
from euler_client.cli.run import run
from euler_client.parse import exit_status


@click.command()
@click.option("-f", "--follow", is_flag=True, help="Stream new output until the job ends (survives reconnects).")
@click.option("--attempt", type=int, help="Attempt number (default: the latest).")
@json_option
@click.argument("job_id", type=int)
@pass_state
def logs(state, follow, attempt, as_json, job_id):
    """Print a job's output (its stderr to stderr when following)."""
    client = state.client()
    if follow:
        client.jobs.get(job_id)  # a missing job says so before any stream opens
        out, err = sys.stdout.buffer, sys.stderr.buffer
        for message in client.jobs.events(job_id):
            if message.get("type") == "attempt":
                note(f"attempt {message.get('attempt')} started (a retry): its log follows from its start")
            if message.get("type") != "log":
                continue
            if as_json:
                chunk = {k: message.get(k) for k in ("attempt", "seq", "stream", "data")}
                out.write((json.dumps(chunk, ensure_ascii=False) + "\n").encode())  # one JSON object per line
                out.flush()
                continue
            stream = err if message["stream"] == "stderr" else out
            stream.write(message["data"].encode("utf-8", "replace"))
            stream.flush()
        return 0
    chunks = list(client.jobs.logs(job_id, attempt=attempt))
    if as_json:
        emit_json({"job": job_id, "attempt": chunks[0].attempt if chunks else None,
                   "log": "".join(c.data for c in chunks)})  # fmt: skip
    else:
        for chunk in chunks:
            sys.stdout.write(chunk.data)
    return 0


@click.command()
@json_option
@click.argument("job_ids", type=int, nargs=-1, required=True)
@pass_state
def cancel(state, as_json, job_ids):
    """Cancel jobs (queued ones at once; running ones are stopped)."""
    from euler_client.errors import EulerError

    client = state.client()
    done, status = [], 0
    for job_id in job_ids:
        try:
            job = client.jobs.cancel(job_id)
        except EulerError as exc:
            note(f"error: job {job_id}: {exc.message} [{exc.code}]")
            status = status or exc.exit_code
            continue
        done.append(job)
        if not as_json:
            click.echo(f"{job_id} {job.get('state')}")
    if as_json:
        emit_json(done)
    return status


@click.command()
@json_option
@click.argument("job_id", type=int)
@pass_state
def retry(state, as_json, job_id):
    """Queue an ended job again for a new attempt."""
    job = state.client().jobs.retry(job_id)
    emit_json(job) if as_json else click.echo(f"{job_id} {job.get('state')}")
    return 0


@click.command()
@json_option
@click.argument("job_id", type=int)
@pass_state
def wait(state, as_json, job_id):
    """Wait for a job to end; exit like `run` (its exit code, or 125 with the reason)."""
    client = state.client()
    client.jobs.get(job_id)
    ended = client.jobs.wait(job_id)
    code, why = exit_status(ended)
    if as_json:
        emit_json(ended)
    else:
        click.echo(
            f"{job_id} {ended.get('state')}"
            + (f" exit {ended['exit_code']}" if ended.get("exit_code") is not None else "")
        )
        if why:
            note(why)
    return code


@click.command("list")
@click.option("--state", "job_state", metavar="STATE[,STATE]", help="queued, assigned, running, succeeded, ...")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@json_option
@pass_state
def jobs_list(state, job_state, limit, as_json):
    """The project's jobs, newest first."""
    items = state.client().jobs.list(state=job_state, limit=limit)
    if as_json:
        return emit_json(items)
    rows = []
    for j in items:
        detail = j.get("pending_reason") if j.get("state") == "queued" else (j.get("reason") or "")
        if j.get("exit_code") is not None:
            detail = f"exit {j['exit_code']}"
        rows.append([j["id"], j.get("name"), j.get("state"), j.get("image"), fmt_cpu(j.get("cpu_milli")),
                     fmt_bytes(j.get("memory_bytes")), j.get("gpu_count") or "", fmt_time(j.get("created_at")), detail])  # fmt: skip
    table(["ID", "NAME", "STATE", "IMAGE", "CPU", "MEMORY", "GPUS", "CREATED", "DETAIL"], rows)


@click.command("show")
@json_option
@click.argument("job_id", type=int)
@pass_state
def jobs_show(state, as_json, job_id):
    """One job with its attempts."""
    j = state.client().jobs.get(job_id)
    if as_json:
        return emit_json(j)
    fields([
        ("id", j["id"]), ("name", j.get("name")), ("state", j.get("state")), ("reason", j.get("reason")),
        ("exit code", j.get("exit_code")), ("pending", j.get("pending_reason")), ("image", j.get("image")),
        ("command", " ".join(j.get("command") or [])), ("cpu", fmt_cpu(j.get("cpu_milli"))),
        ("memory", fmt_bytes(j.get("memory_bytes"))), ("gpus", _gpus(j)),
        ("timeout", f"{j.get('timeout_seconds')} s"), ("isolation", j.get("isolation")), ("retries", f"{j.get('retries_used')} of {j.get('max_retries')}"),
        ("created", fmt_time(j.get("created_at"))), ("ended", fmt_time(j.get("ended_at"))),
    ])  # fmt: skip
    workflow = []
    if j.get("array"):
        from euler_client.cli.arrays import counts_line

        a = state.client().arrays.get(j["array"])
        workflow += [
            ("array", f"{a['id']} (task {j.get('array_index')} of {a.get('count')})"),
            ("progress", counts_line(a)),
        ]
    for d in j.get("depends_on") or []:
        target = f"job {d['job']}" if d.get("job") else f"array {d.get('array')}"
        workflow.append(("depends on", f"{target} {d.get('condition')} ({d.get('state')})"))
    if workflow:
        fields(workflow)
    attempts = j.get("attempts") or []
    if attempts:
        click.echo()
        table(["ATTEMPT", "NODE", "RUNTIME", "STATE", "REASON", "EXIT", "STARTED", "ENDED"],
              [[a["number"], a.get("node"), a.get("runtime") or "-", a.get("state"), a.get("reason"), a.get("exit_code"),
                fmt_time(a.get("started_at")), fmt_time(a.get("ended_at"))] for a in attempts])  # fmt: skip
        rows = [[a["number"], s.get("uuid"), f"{s.get('utilization_avg', 0):g}%", f"{s.get('utilization_max', 0):g}%",
                 fmt_bytes(s.get("memory_peak_bytes")), s.get("memory_source")]
                for a in attempts for s in a.get("gpu_stats") or []]  # fmt: skip
        if rows:
            click.echo()
            table(["ATTEMPT", "GPU", "UTIL AVG", "UTIL MAX", "PEAK MEMORY", "MEMORY OF"], rows)


def _gpus(j: dict) -> str:
    """The GPU request as asked: "2", or "2 × A100* ≥ 40 GiB"."""
    typed = j.get("gpus") or {}
    text = str(j.get("gpu_count") or 0)
    if typed.get("model"):
        text += f" × {typed['model']}"
    if typed.get("min_memory_gib"):
        text += f" ≥ {typed['min_memory_gib']:g} GiB"
    return text


jobs = NounGroup("jobs", "Your project's jobs: list (the default), show, run, logs, cancel, wait, retry.")
for _command in (jobs_list, jobs_show, run, logs, cancel, wait, retry):
    jobs.add_command(_command)
