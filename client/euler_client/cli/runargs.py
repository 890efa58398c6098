"""The options of `euler run`, declared once, and the fast path that runs the everyday forms without click.

`run.py` builds the click command (help, completion, every error message) from RUN_OPTIONS; `fast_run` reads
the same table to parse `euler run [--opt value]... IMAGE [--] COMMAND...` with no framework, and gives up
(returns None, and click takes over) on anything else: `--help`, a job file, an unknown flag, a bad value.
Click's import alone costs more CPU than the rest of a run.
"""

from __future__ import annotations

from collections import namedtuple

from euler_client.parse import (
    ParseError,
    parse_after,
    parse_bytes,
    parse_cpu,
    parse_duration,
    parse_env,
    parse_gib,
    parse_labels,
    parse_retry_on,
)

# A namedtuple, not a dataclass: `dataclasses` imports `inspect`, a third of the CLI's own start-up CPU.
Option = namedtuple("Option", "flags dest help parse metavar multiple flag", defaults=(None, None, False, False))
Option.__doc__ = """One option of `run`: its flags (tuple of str), `dest` (the click parameter's name), its help, `parse`
(text → value; None: the text itself), `metavar`, `multiple` (repeatable), `flag` (takes no value)."""


RUN_OPTIONS: tuple[Option, ...] = (
    Option(("-f", "--file"), "job_file", "Job file (YAML or JSON) with the API's fields.", metavar="FILE"),
    Option(("--name",), "name", "Job name (default: the image's name)."),
    Option(("--cpu",), "cpu", "CPU: 0.5, 2 or 500m (default 0.5).", parse_cpu),
    Option(("--memory",), "memory", "Memory limit: 256Mi, 1Gi (default 256Mi).", parse_bytes),
    Option(("--gpus",), "gpus", "Whole GPUs (default 0).", int),
    Option(("--gpu-model",), "gpu_model", "GPU model glob over the NVML name: 'A100*', '*80GB*'.", metavar="GLOB"),
    Option(
        ("--gpu-min-memory",),
        "gpu_min_memory",
        "Least memory per GPU in GiB: 40, 79.5, 40Gi.",
        parse_gib,
        metavar="GIB",
    ),  # fmt: skip
    Option(("--disk",), "disk", "Writable-layer limit: 10Gi.", parse_bytes),
    Option(("--timeout",), "timeout", "300, 5m, 1h30m (default 1h).", parse_duration),
    Option(("--retries",), "retries", "Automatic retries (server default 1).", int),
    Option(
        ("--retry-on",),
        "retry_on",
        "Retried automatically: lost,failed,timeout and exit codes (75,128-143).",
        metavar="LIST",
    ),  # fmt: skip
    Option(("--region",), "region", "Only nodes of this region."),
    Option(("--label",), "labels", "Node label the job needs (repeatable).", metavar="K=V", multiple=True),
    Option(("--env",), "env", "Environment variable; K alone passes yours.", metavar="K=V", multiple=True),
    Option(("--env-file",), "env_file", "KEY=VALUE lines.", metavar="FILE"),
    Option(("--pool",), "pool", "any (default) or own."),
    Option(("--min-trust",), "min_trust", "community (default) or platform."),
    Option(("--priority",), "priority", "-100..100, within your project (default 0).", int),
    Option(
        ("--priority-class",),
        "priority_class",
        "A priority class by name (euler classes); default: the project's.",
        metavar="NAME",
    ),  # fmt: skip
    Option(("--network",), "network", "default or none (loopback only)."),
    Option(("--isolation",), "isolation", "default (the node's trust level decides) or sandbox (gVisor everywhere)."),
    Option(("--array",), "array", "Run N tasks (EULER_ARRAY_INDEX 0..N-1, EULER_ARRAY_COUNT).", int, metavar="N"),
    Option(("--parallelism",), "parallelism", "With --array: at most P tasks running at once.", int, metavar="P"),
    Option(
        ("--after",),
        "after",
        "Wait for JOB to succeed (JOB:ended: to end; array:ID for an array); repeatable.",
        parse_after,
        metavar="JOB[:ended]",
        multiple=True,
    ),  # fmt: skip
    Option(("-d", "--detach"), "detach", "Print the job id and return at once.", flag=True),
    Option(("-q", "--quiet"), "quiet", "No progress lines on stderr.", flag=True),
    Option(("--json",), "as_json", "Print JSON for scripts.", flag=True),
)
_BY_FLAG = {flag: option for option in RUN_OPTIONS for flag in option.flags}
_SLOW = {"job_file", "env_file"}  # files to read and report on: click's path says what is wrong with them


def fast_parse(args: list[str]) -> dict | None:
    """The values of `run`'s arguments as click would pass them, or None where click must decide."""
    values: dict = {o.dest: (() if o.multiple else (False if o.flag else None)) for o in RUN_OPTIONS}
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        name, eq, inline = args[i].partition("=")
        option = _BY_FLAG.get(name)
        if option is None or option.dest in _SLOW or (option.flag and eq):
            return None
        if option.flag:
            values[option.dest] = True
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args):
                return None
            inline, i = args[i + 1], i + 1
        try:
            value = option.parse(inline) if option.parse else inline
        except (ParseError, ValueError):
            return None
        values[option.dest] = (*values[option.dest], value) if option.multiple else value
        i += 1
    if args[i : i + 1] == ["--"]:
        i += 1
    if i >= len(args) or args[i].startswith("-"):
        return None
    values["image"], values["command"] = args[i], tuple(args[i + 1 :])
    return values


def fast_run(args: list[str]) -> int | None:
    """`euler run ARGS` without click, or None to let click handle these arguments."""
    values = fast_parse(args)
    if values is None:
        return None
    try:
        request = run_request(values, node_selector=parse_labels(values["labels"]), env=parse_env(values["env"]))
    except ParseError:
        return None
    from euler_client.cli.attach import run_job
    from euler_client.cli.state import State

    state = State(None)
    try:
        return run_job(state.client(), request)
    finally:
        state.close()


def run_request(values: dict, *, node_selector: dict, env: dict, file_body: dict | None = None):
    """The typed request from the values of RUN_OPTIONS (as parsed by click or by fast_parse), with what was
    read from them (labels, env, the job file) given apart."""
    from euler_client.jobrequest import RunRequest

    command = values["command"][1:] if values["command"][:1] == ("--",) else values["command"]  # `IMAGE -- CMD`
    return RunRequest(
        image=values["image"], command=tuple(command), file_body=file_body, name=values["name"],
        cpu_milli=values["cpu"], memory_bytes=values["memory"], gpu_count=values["gpus"], disk_bytes=values["disk"],
        gpu_model=values["gpu_model"], gpu_min_memory_gib=values["gpu_min_memory"],
        timeout_seconds=values["timeout"], max_retries=values["retries"],
        retry_on=parse_retry_on(values["retry_on"]) if values["retry_on"] is not None else None,
        region=values["region"], node_selector=node_selector, env=env, pool=values["pool"],
        min_trust=values["min_trust"], priority=values["priority"], network=values["network"],
        priority_class=values["priority_class"],
        isolation=values["isolation"], detach=values["detach"], quiet=values["quiet"], as_json=values["as_json"],
        array_count=values["array"], parallelism=values["parallelism"], depends_on=list(values["after"]),
    )  # fmt: skip
