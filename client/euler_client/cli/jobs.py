"""Job commands: run, logs, cancel, retry, wait, and `jobs list|show`."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import click

from euler_client.cli.commands import BYTES, CPU, DURATION, cli, json_option, pass_state
from euler_client.cli.output import emit_json, fields, fmt_bytes, fmt_cpu, fmt_time, note, table
from euler_client.errors import EXIT_INTERRUPTED, Conflict
from euler_client.parse import ParseError, exit_status, job_body, parse_env, parse_env_file, parse_labels, parse_list

PENDING_REFRESH_S = 2.0  # how often `run` re-reads a queued job's pending reason, for display only


def _load_job_file(path: str) -> dict:
    import yaml

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint="'-f'") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise click.BadParameter(f"{path} is not valid YAML{at}", param_hint="'-f'") from None
    if not isinstance(data, dict):
        raise click.BadParameter(f"{path} must hold a mapping of job fields", param_hint="'-f'")
    return data


def _env(items: tuple[str, ...], env_file: str | None) -> dict:
    env: dict[str, str] = {}
    try:
        if env_file:
            try:
                env.update(parse_env_file(Path(env_file).read_text()))
            except OSError as exc:
                raise click.BadParameter(f"cannot read {env_file}: {exc.strerror}", param_hint="'--env-file'") from None
        env.update(parse_env(items))
    except ParseError as exc:
        raise click.BadParameter(str(exc), param_hint="'--env'") from None
    return env


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("-f", "--file", "job_file", metavar="FILE", help="Job file (YAML or JSON) with the API's fields.")
@click.option("--name", help="Job name (default: the image's name).")
@click.option("--cpu", type=CPU, help="CPU: 0.5, 2 or 500m (default 0.5).")
@click.option("--memory", type=BYTES, help="Memory limit: 256Mi, 1Gi (default 256Mi).")
@click.option("--gpus", type=int, help="Whole GPUs (default 0).")
@click.option("--disk", type=BYTES, help="Writable-layer limit: 10Gi.")
@click.option("--timeout", type=DURATION, help="300, 5m, 1h30m (default 1h).")
@click.option("--retries", type=int, help="Automatic retries (server default 1).")
@click.option("--retry-on", metavar="LIST", help="Endings retried automatically: lost,failed,timeout.")
@click.option("--region", help="Only nodes of this region.")
@click.option("--label", "labels", multiple=True, metavar="K=V", help="Node label the job needs (repeatable).")
@click.option("--env", "env", multiple=True, metavar="K=V", help="Environment variable; K alone passes yours.")
@click.option("--env-file", metavar="FILE", help="KEY=VALUE lines.")
@click.option("--pool", help="any (default) or own.")
@click.option("--min-trust", help="community (default) or platform.")
@click.option("--priority", type=int, help="-100..100, within your project (default 0).")
@click.option("--network", help="default or none (loopback only).")
@click.option("-d", "--detach", is_flag=True, help="Print the job id and return at once.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@json_option
@click.argument("image", required=False)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_state
def run(state, job_file, name, cpu, memory, gpus, disk, timeout, retries, retry_on, region, labels, env, env_file,
        pool, min_trust, priority, network, detach, quiet, as_json, image, command):  # fmt: skip
    """Run IMAGE with COMMAND on the pool, show its output live, exit with its exit code.

    \b
    euler run alpine:3.20 -- sh -c 'echo hello'
    euler run --cpu 2 --memory 4Gi --gpus 1 --timeout 2h registry/team/train:1 -- python train.py
    euler run -f job.yaml

    The first Ctrl-C cancels the job and waits for its end; a second one detaches.
    """
    if command[:1] == ("--",):  # `IMAGE -- CMD`: once IMAGE is read, click leaves the `--` in the command
        command = command[1:]
    file_body = _load_job_file(job_file) if job_file else None
    if not image and not (file_body or {}).get("image"):
        raise click.UsageError("Missing argument 'IMAGE' (or -f FILE)")
    try:
        node_selector = parse_labels(labels)
    except ParseError as exc:
        raise click.BadParameter(str(exc), param_hint="'--label'") from None
    body = job_body(
        file_body=file_body, image=image, command=list(command), name=name, cpu_milli=cpu, memory_bytes=memory,
        gpu_count=gpus, disk_bytes=disk, timeout_seconds=timeout, max_retries=retries,
        retry_on=parse_list(retry_on) if retry_on is not None else None, region=region,
        node_selector=node_selector, env=_env(env, env_file), pool=pool, min_trust=min_trust, priority=priority,
        network=network,
    )  # fmt: skip
    client = state.client()
    if not detach and not as_json:
        _import_in_background("websockets.sync.client")  # needed right after the submit: overlap the two
    job = client.jobs.submit(body)
    if detach:
        emit_json(job) if as_json else click.echo(job["id"])
        return 0
    if as_json:
        ended = client.jobs.wait(job["id"])
        emit_json(ended)
        return exit_status(ended)[0]
    return Attach(client, job, quiet=quiet).run()


def _import_in_background(name: str) -> None:
    import importlib
    import threading

    threading.Thread(target=importlib.import_module, args=(name,), daemon=True).start()


class Attach:
    """`euler run` after the submit: progress on stderr, the job's streams on ours, Ctrl-C to cancel."""

    def __init__(self, client, job: dict, *, quiet: bool = False):
        self.client, self.job, self.quiet = client, job, quiet
        self.job_id = job["id"]
        self.interrupts = 0
        self.cancel_sent = False
        self.shown: tuple = ()
        self.pending_read_at = time.monotonic()

    def say(self, message: str) -> None:
        if not self.quiet:
            note(message)

    def announce(self, job: dict) -> None:
        """One line per change of state (and of pending reason while queued)."""
        state = job.get("state")
        node = (job.get("attempts") or [{}])[-1].get("node") if state in ("assigned", "running") else None
        key = (state, job.get("pending_reason") if state == "queued" else node)
        if key == self.shown:
            return
        self.shown = key
        if state == "queued":
            reason = job.get("pending_reason")
            self.say(f"job {self.job_id} queued" + (f": {reason}" if reason else ""))
        elif state == "assigned":
            self.say(f"job {self.job_id} assigned to node {node}")
        elif state == "running":
            self.say(f"job {self.job_id} running on node {node}")

    def _on_sigint(self, signum, frame) -> None:
        self.interrupts += 1
        if self.interrupts >= 2:
            raise _Detach

    def run(self) -> int:
        self.say(f"job {self.job_id} submitted")
        previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            return self._follow()
        except _Detach:
            note(f"detached; job {self.job_id} keeps running (euler logs -f {self.job_id}, euler cancel {self.job_id})")
            return EXIT_INTERRUPTED
        finally:
            signal.signal(signal.SIGINT, previous)

    def _follow(self) -> int:
        out, err = sys.stdout.buffer, sys.stderr.buffer
        for message in self.client.jobs.stream(self.job_id, tick=0.2):
            if self.interrupts and not self.cancel_sent:
                self.cancel_sent = True
                note(f"cancelling job {self.job_id} (Ctrl-C again to detach)")
                try:
                    self.client.jobs.cancel(self.job_id)
                except Conflict:
                    pass  # it ended meanwhile
            kind = message.get("type") if message else None
            if kind == "log":
                stream = err if message["stream"] == "stderr" else out
                stream.write(message["data"].encode("utf-8", "replace"))
                stream.flush()
            elif self.quiet and kind in ("connected", "state"):
                continue  # progress is only shown: no need to read the job
            elif kind == "connected" or (kind == "state" and message.get("state") != "queued"):
                self.announce(self.client.jobs.get(self.job_id))  # after subscribing: no move falls between
                self.pending_read_at = time.monotonic()
            elif kind == "state":
                self.shown = ()
                self.announce(self.client.jobs.get(self.job_id))
            elif kind == "attempt":
                self.say(f"job {self.job_id}: attempt {message.get('attempt')} started")
            elif kind == "end":
                break
            elif message is None and not self.quiet and self.shown[:1] == ("queued",):
                if time.monotonic() - self.pending_read_at >= PENDING_REFRESH_S:
                    self.pending_read_at = time.monotonic()
                    self.announce(self.client.jobs.get(self.job_id))
        ended = self.client.jobs.get(self.job_id)
        code, why = exit_status(ended)
        if why:
            note(why)
        elif ended.get("state") == "succeeded":
            self.say(f"job {self.job_id} succeeded")
        else:
            self.say(f"job {self.job_id} {ended.get('state')} (exit {code})")
        return code


class _Detach(BaseException):
    """The second Ctrl-C: leave the job running."""


@cli.command()
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


@cli.command()
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


@cli.command()
@json_option
@click.argument("job_id", type=int)
@pass_state
def retry(state, as_json, job_id):
    """Queue an ended job again for a new attempt."""
    job = state.client().jobs.retry(job_id)
    emit_json(job) if as_json else click.echo(f"{job_id} {job.get('state')}")
    return 0


@cli.command()
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


@cli.group()
def jobs():
    """List and show jobs (also: euler run, logs, cancel, retry, wait)."""


@jobs.command("list")
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


@jobs.command("show")
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
        ("memory", fmt_bytes(j.get("memory_bytes"))), ("gpus", j.get("gpu_count")),
        ("timeout", f"{j.get('timeout_seconds')} s"), ("retries", f"{j.get('retries_used')} of {j.get('max_retries')}"),
        ("created", fmt_time(j.get("created_at"))), ("ended", fmt_time(j.get("ended_at"))),
    ])  # fmt: skip
    attempts = j.get("attempts") or []
    if attempts:
        click.echo()
        table(["ATTEMPT", "NODE", "STATE", "REASON", "EXIT", "STARTED", "ENDED"],
              [[a["number"], a.get("node"), a.get("state"), a.get("reason"), a.get("exit_code"),
                fmt_time(a.get("started_at")), fmt_time(a.get("ended_at"))] for a in attempts])  # fmt: skip
