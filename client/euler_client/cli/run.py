"""`euler run` (also `euler jobs run`): the click command; its options are declared in runargs.py."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from euler_client.cli.attach import run_job
from euler_client.cli.base import AFTER, BYTES, CPU, DURATION, GIB, pass_state
from euler_client.cli.runargs import RUN_OPTIONS, run_request
from euler_client.jobrequest import RunRequest
from euler_client.parse import (
    ParseError,
    parse_after,
    parse_bytes,
    parse_cpu,
    parse_duration,
    parse_env,
    parse_env_file,
    parse_gib,
    parse_labels,
)


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


def _options(f):
    """The click options of RUN_OPTIONS (declared once, shared with the fast path)."""
    types = {
        parse_cpu: CPU,
        parse_bytes: BYTES,
        parse_duration: DURATION,
        parse_gib: GIB,
        parse_after: AFTER,
        int: int,
        None: None,
    }
    for option in reversed(RUN_OPTIONS):
        kwargs = {"is_flag": True} if option.flag else {"type": types[option.parse], "multiple": option.multiple}
        f = click.option(*option.flags, option.dest, metavar=option.metavar, help=option.help, **kwargs)(f)
    return f


@click.command(context_settings={"allow_interspersed_args": False})
@_options
@click.argument("image", required=False)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_state
def run(state, **options) -> int:
    """Run IMAGE with COMMAND on the pool, show its output live, exit with its exit code.

    \b
    euler run alpine:3.20 -- sh -c 'echo hello'
    euler run --cpu 2 --memory 4Gi --gpus 1 --timeout 2h registry/team/train:1 -- python train.py
    euler run --gpus 2 --gpu-model 'A100*' --gpu-min-memory 40 registry/team/train:1 -- python train.py
    euler run -f job.yaml
    euler run --array 100 --parallelism 10 alpine:3.20 -- sh -c 'echo $EULER_ARRAY_INDEX'
    euler run --after 12 --after 13:ended alpine:3.20 -- echo next

    The first Ctrl-C cancels the job and waits for its end; a second one detaches.
    """
    return run_job(state.client(), _request(options))


def _request(values: dict) -> RunRequest:
    """The command line's values, with the files they name read, into one typed request (click's errors)."""
    file_body = _load_job_file(values["job_file"]) if values["job_file"] else None
    if not values["image"] and not (file_body or {}).get("image"):
        raise click.UsageError("Missing argument 'IMAGE' (or -f FILE)")
    try:
        node_selector = parse_labels(values["labels"])
    except ParseError as exc:
        raise click.BadParameter(str(exc), param_hint="'--label'") from None
    env = _env(values["env"], values["env_file"])
    return run_request(values, node_selector=node_selector, env=env, file_body=file_body)
