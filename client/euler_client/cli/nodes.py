"""`euler nodes VERB`: list (the default; your nodes and the public pool), show, token (enroll a host), mine (the
machines you lent), terms (a lent machine's terms)."""

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


@click.command("mine")
@json_option
@pass_state
def nodes_mine(state, as_json):
    """The machines you lent: state, reliability, what runs there, losses and hours contributed (30 days)."""
    machines = state.client().nodes.mine()
    if as_json:
        return emit_json(machines)
    if not machines:
        click.echo("You have not lent a machine (the nodes whose enrollment token you created).")
        return
    rows = []
    for m in machines:
        days = m.get("daily") or []
        last = m.get("last_30_days") or {}
        running = m.get("running") or {}
        rows.append([m.get("name"), m.get("state"), m.get("trust"), (m.get("reliability") or {}).get("score"),
                     len(running.get("jobs") or []) + (running.get("other_jobs") or 0),
                     f"{sum(d.get('cpu_hours', 0) for d in days):.1f}", f"{sum(d.get('gpu_hours', 0) for d in days):.1f}",
                     last.get("lost_attempts"), last.get("reclaims"), last.get("gpu_faults"),
                     "yes" if m.get("terms") else ""])  # fmt: skip
    table(["NAME", "STATE", "TRUST", "RELIABILITY", "RUNNING", "CPU H (30D)", "GPU H (30D)", "LOST", "RECLAIMS",
           "GPU FAULTS", "TERMS"], rows, title="Your machines")  # fmt: skip


def _window(text: str) -> dict:
    """ "weekdays 20:00-08:00" or "sat,sun 00:00-00:00" → a window; the server checks days and times."""
    days, _, span = text.strip().rpartition(" ")
    start, dash, end = span.partition("-")
    if not days or not dash:
        raise click.BadParameter(
            f"{text!r}: write DAYS HH:MM-HH:MM, e.g. 'weekdays 20:00-08:00'", param_hint="'--window'"
        )
    return {"days": [d for d in days.replace(" ", "").split(",") if d], "start": start, "end": end}


@click.command("terms")
@click.argument("name")
@click.option("--timezone", "zone", metavar="TZ", help="IANA zone the windows are read in (default UTC).")
@click.option("--window", "windows", multiple=True, metavar="'DAYS HH:MM-HH:MM'",
              help="An availability window, e.g. 'weekdays 20:00-08:00' (repeatable; replaces the windows).")  # fmt: skip
@click.option("--always", is_flag=True, help="Remove the windows: available whenever it is online.")
@click.option("--max-cpu", "max_cpu_milli", type=int, metavar="MILLICORES", help="CPU cap (at most the approved).")
@click.option("--max-memory", "max_memory_bytes", type=int, metavar="BYTES", help="Memory cap.")
@click.option("--max-gpus", type=int, metavar="N", help="GPU cap.")
@click.option("--max-disk", "max_disk_bytes", type=int, metavar="BYTES", help="Disk cap.")
@click.option("--project", "projects", multiple=True, metavar="NAME", help="Lend to this project only (repeatable).")
@click.option("--any-project", is_flag=True, help="Remove the project list.")
@click.option("--max-hours", "max_job_hours", type=float, metavar="H", help="The longest job it takes.")
@click.option("--clear", is_flag=True, help="Remove every term.")
@json_option
@pass_state
def nodes_terms(state, name, zone, windows, always, max_cpu_milli, max_memory_bytes, max_gpus, max_disk_bytes,
                projects, any_project, max_job_hours, clear, as_json):  # fmt: skip
    """Show or change the terms of a machine you lent; options change only what they name."""
    client = state.client()
    given = {"timezone": zone, "max_cpu_milli": max_cpu_milli, "max_memory_bytes": max_memory_bytes,
             "max_gpus": max_gpus, "max_disk_bytes": max_disk_bytes, "max_job_hours": max_job_hours}  # fmt: skip
    changes = {k: v for k, v in given.items() if v is not None}
    if windows or always:
        changes["windows"] = [_window(w) for w in windows]
    if projects or any_project:
        changes["allowed_projects"] = list(projects)
    if clear:
        terms = client.nodes.set_terms(name, {})
    elif changes:
        current = client.nodes.terms(name) or {}
        terms = client.nodes.set_terms(name, {**{k: v for k, v in current.items() if v is not None}, **changes})
    else:
        terms = client.nodes.terms(name)
    if as_json:
        return emit_json(terms)
    if not terms:
        click.echo(f"{name}: no terms (available whenever it is online, up to its approved capacity)")
        return
    for w in terms.get("windows") or []:
        click.echo(f"window     {','.join(w['days'])} {w['start']}-{w['end']} ({terms.get('timezone')})")
    for key in ("max_cpu_milli", "max_memory_bytes", "max_gpus", "max_disk_bytes", "max_job_hours"):
        if terms.get(key) is not None:
            click.echo(f"{key:<18} {terms[key]}")
    if terms.get("allowed_projects"):
        click.echo(f"projects   {', '.join(terms['allowed_projects'])}")


nodes = NounGroup("nodes", "Your nodes and the public pool: list (the default), show, token, mine, terms.")
for _command in (nodes_list, nodes_show, nodes_token, nodes_mine, nodes_terms):
    nodes.add_command(_command)
