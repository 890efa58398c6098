"""`euler run` (also `euler jobs run`): submit a job, show its progress, copy its output, exit with its code."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import click

from euler_client.cli.base import BYTES, CPU, DURATION, json_option, pass_state
from euler_client.cli.output import emit_json, note
from euler_client.errors import EXIT_INTERRUPTED, Conflict
from euler_client.jobrequest import RunRequest
from euler_client.parse import ParseError, exit_status, parse_env, parse_env_file, parse_labels, parse_list

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


@click.command(context_settings={"allow_interspersed_args": False})
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
def run(state, **options) -> int:
    """Run IMAGE with COMMAND on the pool, show its output live, exit with its exit code.

    \b
    euler run alpine:3.20 -- sh -c 'echo hello'
    euler run --cpu 2 --memory 4Gi --gpus 1 --timeout 2h registry/team/train:1 -- python train.py
    euler run -f job.yaml

    The first Ctrl-C cancels the job and waits for its end; a second one detaches.
    """
    return run_job(state.client(), run_request(**options))


def run_request(*, job_file, image, command, labels, env, env_file, retry_on, cpu, memory, gpus, disk, timeout,
                retries, **rest) -> RunRequest:  # fmt: skip
    """The command line's values, read (job file, env file, labels) into one typed request."""
    if command[:1] == ("--",):  # `IMAGE -- CMD`: once IMAGE is read, click leaves the `--` in the command
        command = command[1:]
    file_body = _load_job_file(job_file) if job_file else None
    if not image and not (file_body or {}).get("image"):
        raise click.UsageError("Missing argument 'IMAGE' (or -f FILE)")
    try:
        node_selector = parse_labels(labels)
    except ParseError as exc:
        raise click.BadParameter(str(exc), param_hint="'--label'") from None
    return RunRequest(
        image=image, command=tuple(command), file_body=file_body, cpu_milli=cpu, memory_bytes=memory,
        gpu_count=gpus, disk_bytes=disk, timeout_seconds=timeout, max_retries=retries,
        retry_on=parse_list(retry_on) if retry_on is not None else None, node_selector=node_selector,
        env=_env(env, env_file), **rest,
    )  # fmt: skip


def run_job(client, request: RunRequest) -> int:
    """Submit the request's job and follow it as asked; the exit status of `euler run`."""
    job = client.jobs.submit(request.body())
    if request.detach:
        emit_json(job) if request.as_json else click.echo(job["id"])
        return 0
    if request.as_json:
        ended = client.jobs.wait(job["id"])
        emit_json(ended)
        return exit_status(ended)[0]
    return Attach(client, job, quiet=request.quiet).run()


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
