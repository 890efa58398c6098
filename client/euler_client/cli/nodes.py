"""`euler nodes VERB`: list (the default; your nodes and the public pool), show, token (enroll a host)."""

from __future__ import annotations

import shlex

import click

from euler_client.cli.base import DURATION, NounGroup, json_option, pass_state
from euler_client.cli.output import emit_json, fmt_bytes, fmt_cpu, fmt_time, note, table
from euler_client.parse import ParseError, parse_labels


@click.command("list")
@json_option
@pass_state
def nodes_list(state, as_json):
    """Your nodes and the public pool."""
    data = state.client().nodes.list()
    if as_json:
        return emit_json(data)
    own = data.get("own") or []
    if own:
        rows = []
        for n in own:
            status = n.get("approval")
            if status == "approved":
                status = "draining" if n.get("draining") else ("online" if n.get("online") else "offline")
            gpus = n.get("gpus") or []
            rows.append([n["id"], n.get("name"), status, n.get("trust"), n.get("region"),
                         f"{fmt_cpu(n.get('allocated_cpu_milli'))}/{fmt_cpu(n.get('cpu_milli'))}",
                         f"{fmt_bytes(n.get('allocated_memory_bytes'))}/{fmt_bytes(n.get('memory_bytes'))}",
                         f"{len(n.get('allocated_gpus') or [])}/{len(gpus)}" if gpus else "",
                         fmt_time(n.get("last_heartbeat_at"))])  # fmt: skip
        table(["ID", "NAME", "STATUS", "TRUST", "REGION", "CPU", "MEMORY", "GPUS", "LAST HEARTBEAT"], rows,
              title="Your nodes")  # fmt: skip
    else:
        click.echo("You have no nodes of your own (euler nodes token makes one).")
    pool = data.get("public_pool") or {}
    click.echo(
        f"\nPublic pool: {pool.get('online', 0)} of {pool.get('nodes', 0)} nodes online, free "
        f"{fmt_cpu(pool.get('free_cpu_milli')) or 0} CPU, {fmt_bytes(pool.get('free_memory_bytes')) or '0B'} memory, "
        f"{pool.get('free_gpus', 0)} GPUs"
    )
    regions = pool.get("by_region") or []
    if regions:
        table(["REGION", "NODES", "ONLINE", "FREE CPU", "FREE MEMORY", "FREE GPUS"],
              [[r.get("region") or "-", r.get("nodes"), r.get("online"), fmt_cpu(r.get("free_cpu_milli")),
                fmt_bytes(r.get("free_memory_bytes")), r.get("free_gpus")] for r in regions])  # fmt: skip
    models = pool.get("by_gpu_model") or []
    if models:
        table(["GPU MODEL", "TOTAL", "FREE"], [[m.get("model"), m.get("total"), m.get("free")] for m in models])


@click.command("show")
@json_option
@click.argument("node_id", type=int)
@pass_state
def nodes_show(state, as_json, node_id):
    """One of your nodes."""
    emit_json(state.client().nodes.get(node_id))


@click.command("token")
@click.option("--trust", help="untrusted (default) or community; platform for staff.")
@click.option("--region", help="Region given to the node.")
@click.option("--label", "labels", multiple=True, metavar="K=V", help="Label given to the node (repeatable).")
@click.option("--ttl", type=DURATION, help="How long it can be used: 1h (default), up to 7d.")
@click.option("--note", "note_text", metavar="TEXT", help="A note for you (shown in token lists).")
@json_option
@pass_state
def nodes_token(state, trust, region, labels, ttl, note_text, as_json):
    """A one-time enrollment token, shown once, with the command to run on the host."""
    try:
        node_labels = parse_labels(labels) or None
    except ParseError as exc:
        raise click.BadParameter(str(exc), param_hint="'--label'") from None
    client = state.client()
    token = client.nodes.create_token(trust=trust, region=region, labels=node_labels, ttl=ttl, label=note_text)
    if as_json:
        return emit_json(token)
    click.echo(token["token"])
    note(f"token {token['id']} expires {fmt_time(token.get('expires_at'))} UTC; it is shown only now")
    note("on the host (Docker engine, Python 3.11, a checkout of Euler), run:")
    command = f"EULER_CONTROL_PLANE_URL={shlex.quote(client.url)} EULER_ENROLLMENT_TOKEN={shlex.quote(token['token'])} ./euler-node"
    note(f"  {command}")


nodes = NounGroup("nodes", "Your nodes and the public pool: list (the default), show, token.")
for _command in (nodes_list, nodes_show, nodes_token):
    nodes.add_command(_command)
