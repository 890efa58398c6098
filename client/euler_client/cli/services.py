"""`euler serve IMAGE` and `euler services VERB`: list (the default), show, logs, scale, delete."""

from __future__ import annotations

import re
import sys

import click

from euler_client.cli.base import BYTES, CPU, DURATION, NounGroup, json_option, pass_state
from euler_client.cli.output import emit_json, fields, fmt_time, note, table
from euler_client.parse import ParseError, default_name, parse_env

_RANGE = re.compile(r"^(\d+)(?::(\d+))?$")


def parse_replicas(text: str) -> dict:
    """`2` (a fixed count) or `MIN:MAX` (autoscaled within the range), as the API's {"min", "max"}."""
    match = _RANGE.match(text.strip())
    if not match:
        raise click.BadParameter(f"{text!r} is not N or MIN:MAX", param_hint="'--replicas'")
    low = int(match.group(1))
    high = int(match.group(2)) if match.group(2) is not None else low
    return {"min": low, "max": high}


def _service_name(image: str) -> str:
    """An agent-valid name from the image: lowercase letters, digits, '-' and '_'."""
    name = re.sub(r"[^a-z0-9_-]+", "-", default_name(image).lower()).strip("-_")
    return (name or "service")[:63]


@click.command("serve", context_settings={"ignore_unknown_options": False})
@click.argument("image")
@click.argument("command", nargs=-1)
@click.option("--port", "-p", type=int, required=True, help="The container port the service listens on.")
@click.option("--replicas", "-r", default="1", show_default=True, help="N, or MIN:MAX to autoscale within.")
@click.option("--name", help="The service's name (default: from the image); its agent has the same name.")
@click.option("--cpu", type=CPU, default="500m", show_default=True, help="CPU per replica (0.5, 500m, 2).")
@click.option("--memory", type=BYTES, default="512Mi", show_default=True, help="Memory per replica.")
@click.option("--gpus", type=int, help="Whole GPUs per replica.")
@click.option("--gpu-model", help='A glob over the GPU name, e.g. "A100*" (with --gpus).')
@click.option("-e", "--env", "env", multiple=True, metavar="KEY=VALUE", help="Environment (platform nodes only).")
@click.option("--health-path", default="/health", show_default=True, help="The readiness probe's path.")
@click.option("--probe-interval", type=int, help="Seconds between readiness probes (default 5).")
@click.option("--probe-failures", type=int, help="Failed probes in a row before a replica is replaced (default 3).")
@click.option("--target-concurrency", type=int, help="Calls in flight per replica to scale at (default 10).")
@click.option("--scale-to-zero", type=DURATION, help="Idle time before scaling to zero (needs MIN 0, e.g. 0:3).")
@click.option("--isolation", type=click.Choice(["default", "sandbox"]))
@json_option
@pass_state
def serve(state, image, command, port, replicas, name, cpu, memory, gpus, gpu_model, env, health_path,
          probe_interval, probe_failures, target_concurrency, scale_to_zero, isolation, as_json):  # fmt: skip
    """Deploy IMAGE as a service: replicas behind the gateway, at /api/v1/agents/NAME/invoke/."""
    if not command:
        raise click.BadParameter("give the command after the image: euler serve IMAGE -p PORT -- CMD ARGS")
    try:
        env_values = parse_env(env)
    except ParseError as exc:
        raise click.BadParameter(str(exc), param_hint="'--env'") from None
    readiness: dict = {"path": health_path}
    if probe_interval is not None:
        readiness["interval_seconds"] = probe_interval
    if probe_failures is not None:
        readiness["failures"] = probe_failures
    body: dict = {
        "name": name or _service_name(image),
        "image": image,
        "command": list(command),
        "port": port,
        "cpu_milli": cpu,
        "memory_bytes": memory,
        "replicas": parse_replicas(replicas),
        "readiness": readiness,
    }
    if env_values:
        body["env"] = env_values
    if gpus:
        body["gpus"] = {"count": gpus, **({"model": gpu_model} if gpu_model else {})}
    if target_concurrency is not None:
        body["target_concurrency"] = target_concurrency
    if scale_to_zero is not None:
        body["scale_to_zero_after_seconds"] = scale_to_zero
    if isolation:
        body["isolation"] = isolation
    service = state.client().services.create(body)
    if as_json:
        return emit_json(service)
    r = service["replicas"]
    note(f"service {service['name']} deployed: {r['current']} replica(s) ({r['min']}..{r['max']}); "
         f"call it at {service['invoke_path']}")  # fmt: skip


@click.command("list")
@json_option
@pass_state
def services_list(state, as_json):
    """The project's services: replicas ready of wanted, revision, rollout."""
    items = state.client().services.list()
    if as_json:
        return emit_json(items)
    table(
        ["NAME", "READY", "RANGE", "REVISION", "ROLLOUT", "IMAGE"],
        [[s["name"], f"{s.get('ready_replicas')}/{s['replicas']['current']}",
          f"{s['replicas']['min']}..{s['replicas']['max']}", s.get("revision"), s.get("rollout") or "-",
          (s.get("spec") or {}).get("image")] for s in items],
    )  # fmt: skip


@click.command("show")
@json_option
@click.argument("name")
@pass_state
def services_show(state, as_json, name):
    """One service: its spec, replicas (where each runs, its health) and recent events."""
    s = state.client().services.get(name)
    if as_json:
        return emit_json(s)
    spec = s.get("spec") or {}
    fields([("name", s["name"]), ("image", spec.get("image")), ("port", s.get("port")),
            ("replicas", f"{s.get('ready_replicas')} ready of {s['replicas']['current']} "
                         f"({s['replicas']['min']}..{s['replicas']['max']})"),
            ("revision", f"{s.get('revision')} (stable {s.get('stable_revision')})"),
            ("rollout", s.get("rollout") or "-"), ("message", s.get("message")),
            ("invoke", s.get("invoke_path")), ("created", fmt_time(s.get("created_at")))])  # fmt: skip
    table(["REPLICA", "REVISION", "STATE", "HEALTH", "NODE", "JOB", "CREATED"],
          [[r["id"], r["revision"], r["state"], r.get("health") or "-", r.get("node") or "-", r.get("job"),
            fmt_time(r.get("created_at"))] for r in s.get("replica_list") or []])  # fmt: skip
    table(["WHEN", "EVENT", "MESSAGE"], [[fmt_time(e["created_at"]), e["kind"], e["message"]]
                                        for e in s.get("events") or []])  # fmt: skip


@click.command("logs")
@click.argument("name")
@click.option("--replica", type=int, help="One replica's log (default: every live replica's tail).")
@pass_state
def services_logs(state, name, replica):
    """The tail of each replica's log (`euler logs JOB -f` follows one replica's job)."""
    sys.stdout.write(state.client().services.logs(name, replica))
    sys.stdout.write("\n")


@click.command("scale")
@click.argument("name")
@click.argument("replicas")
@json_option
@pass_state
def services_scale(state, name, replicas, as_json):
    """Set the replicas: N (fixed) or MIN:MAX (autoscaled)."""
    s = state.client().services.scale(name, parse_replicas(replicas))
    if as_json:
        return emit_json(s)
    r = s["replicas"]
    note(f"service {name}: {r['current']} replica(s) ({r['min']}..{r['max']})")


@click.command("delete")
@click.argument("name")
@pass_state
def services_delete(state, name):
    """Delete a service: every replica leaves the rotation, drains, then stops."""
    state.client().services.delete(name)
    note(f"service {name} is being deleted (its replicas drain first)")


services = NounGroup(
    "services", "Services on the pool: list (the default), show, logs, scale, delete.", aliases={"get": "show"}
)
for _command in (services_list, services_show, services_logs, services_scale, services_delete):
    services.add_command(_command)
