"""`euler agents VERB`: list (the default), show, create, delete, invoke (SSE answers event by event)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from euler_client.cli.base import NounGroup, json_option, pass_state
from euler_client.cli.output import emit_json, fields, fmt_time, note, table


@click.command("list")
@json_option
@pass_state
def agents_list(state, as_json):
    """The project's agents and their instances' health."""
    items = state.client().agents.list()
    if as_json:
        return emit_json(items)
    rows = []
    for a in items:
        instances = a.get("instances") or []
        healthy = sum(1 for i in instances if i.get("health") == "healthy")
        rows.append([a.get("name"), f"{healthy}/{len(instances)}", a.get("health_path"), a.get("description")])
    table(["NAME", "HEALTHY", "HEALTH PATH", "DESCRIPTION"], rows)


@click.command("show")
@json_option
@click.argument("name")
@pass_state
def agents_show(state, as_json, name):
    """One agent with its instances."""
    a = state.client().agents.get(name)
    if as_json:
        return emit_json(a)
    fields([("name", a.get("name")), ("description", a.get("description")), ("health path", a.get("health_path")),
            ("auth header", a.get("auth_header_name") if a.get("has_auth_header") else ""),
            ("created", fmt_time(a.get("created_at")))])  # fmt: skip
    table(["ID", "BASE URL", "WEIGHT", "ENABLED", "HEALTH", "LATENCY MS", "LAST ERROR"],
          [[i["id"], i.get("base_url"), i.get("weight"), "yes" if i.get("enabled") else "no", i.get("health"),
            i.get("latency_ms"), i.get("last_error")] for i in a.get("instances") or []])  # fmt: skip


@click.command("create")
@click.argument("name")
@click.option("--url", "urls", multiple=True, metavar="URL[=WEIGHT]", help="Instance base URL (repeatable).")
@click.option("--health-path", help="GET path that answers 2xx when healthy (default /health).")
@click.option("--description")
@click.option("--auth-header", metavar="NAME:VALUE", help="Header added to every call (stored encrypted).")
@json_option
@pass_state
def agents_add(state, name, urls, health_path, description, auth_header, as_json):
    """Register an agent with its instances."""
    instances = []
    for item in urls:
        base, _, weight = item.rpartition("=") if item.rpartition("=")[2].isdigit() else (item, "", "")
        instances.append({"base_url": base, **({"weight": int(weight)} if weight else {})})
    body: dict = {"name": name, "instances": instances}
    if health_path is not None:
        body["health_path"] = health_path
    if description is not None:
        body["description"] = description
    if auth_header:
        header, sep, value = auth_header.partition(":")
        if not sep:
            raise click.BadParameter(f"{auth_header!r} is not NAME:VALUE", param_hint="'--auth-header'")
        body["auth_header_name"], body["auth_header_value"] = header.strip(), value.strip()
    agent = state.client().agents.create(body)
    emit_json(agent) if as_json else note(f"agent {agent.get('name')} added with {len(instances)} instance(s)")


@click.command("delete")
@click.argument("name")
@pass_state
def agents_remove(state, name):
    """Delete an agent and its instances."""
    state.client().agents.delete(name)
    note(f"agent {name} removed")


def _body(data: str | None) -> tuple[object, bytes | None]:
    """--data JSON or @file: (parsed JSON or None, raw bytes or None)."""
    if data is None:
        return None, None
    if data.startswith("@"):
        try:
            raw = sys.stdin.buffer.read() if data == "@-" else Path(data[1:]).read_bytes()
        except OSError as exc:
            raise click.BadParameter(f"cannot read {data[1:]}: {exc.strerror}", param_hint="'--data'") from None
    else:
        raw = data.encode()
    try:
        return json.loads(raw), None
    except ValueError:
        return None, raw  # not JSON: sent as it is


@click.command("invoke")
@click.argument("name")
@click.argument("path", default="")
@click.option("-X", "--method", help="HTTP method (default POST with --data, else GET).")
@click.option("-d", "--data", metavar="JSON|@FILE", help="Request body (@- reads stdin).")
@click.option("-H", "--header", "headers", multiple=True, metavar="K:V", help="Extra header (repeatable).")
@click.option("--timeout", type=float, help="Longest silence while reading the answer, in seconds.")
@json_option
@pass_state
def agents_invoke(state, name, path, method, data, headers, timeout, as_json):
    """Call an agent through the gateway; an SSE answer is printed event by event."""
    from euler_client.client import sse_events

    parsed, raw = _body(data)
    extra = {}
    for item in headers:
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not K:V", param_hint="'--header'")
        extra[key.strip()] = value.strip()
    if raw is not None and not any(k.lower() == "content-type" for k in extra):
        extra["Content-Type"] = "application/octet-stream"
    method = (method or ("POST" if data is not None else "GET")).upper()
    client = state.client()
    with client.agents.invoke(name, path, method=method, json_body=parsed, content=raw, headers=extra,
                              timeout=timeout) as response:  # fmt: skip
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for event in sse_events(response):
                if as_json:
                    sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
                else:
                    prefix = "" if event["event"] == "message" else f"[{event['event']}] "
                    sys.stdout.write(prefix + event["data"] + "\n")
                sys.stdout.flush()
        else:
            for part in response.iter_bytes():
                sys.stdout.buffer.write(part)
                sys.stdout.flush()
        if response.status_code >= 400:
            note(f"the agent answered HTTP {response.status_code}")
            return 1
    return 0


agents = NounGroup(
    "agents",
    "HTTP agents fronted by the gateway: list (the default), show, create, delete, invoke.",
    aliases={"add": "create", "remove": "delete"},
)
for _command in (agents_list, agents_show, agents_add, agents_remove, agents_invoke):
    agents.add_command(_command)
