"""`euler schedules VERB` (list, show, create, delete, enable, disable, runs) and `euler webhooks VERB` (list,
create, delete, deliveries, redeliver)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from euler_client.cli.base import BYTES, CPU, DURATION, NounGroup, json_option, pass_state
from euler_client.cli.output import emit_json, fields, fmt_time, note, table
from euler_client.parse import ParseError, job_body, parse_env, parse_retry_on


def _job_file(path: str) -> dict:
    import yaml

    try:
        data = yaml.safe_load(sys.stdin.read() if path == "-" else Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint="'-f'") from None
    if not isinstance(data, dict):
        raise click.BadParameter(f"{path} must hold a mapping of job fields", param_hint="'-f'")
    return data


@click.command("list")
@json_option
@pass_state
def schedules_list(state, as_json):
    """The project's schedules and their next tick."""
    items = state.client().schedules.list()
    if as_json:
        return emit_json(items)
    table(["NAME", "CRON", "TIME ZONE", "OVERLAP", "ENABLED", "NEXT TICK", "IMAGE"],
          [[s["name"], s["cron"], s["timezone"], s["overlap"], "yes" if s["enabled"] else "no",
            fmt_time(s.get("next_tick_at")), (s.get("job") or {}).get("image")] for s in items])  # fmt: skip


@click.command("show")
@click.argument("name")
@json_option
@pass_state
def schedules_show(state, name, as_json):
    """One schedule and its latest runs."""
    client = state.client()
    s, runs = client.schedules.get(name), client.schedules.runs(name)
    if as_json:
        return emit_json({**s, "runs": runs})
    fields([("name", s["name"]), ("cron", f"{s['cron']} ({s['timezone']})"), ("overlap", s["overlap"]),
            ("enabled", "yes" if s["enabled"] else "no"), ("next tick", fmt_time(s.get("next_tick_at"))),
            ("job", json.dumps(s.get("job"))), ("created by", s.get("created_by"))])  # fmt: skip
    table(["TICK", "OUTCOME", "JOB", "MESSAGE"],
          [[fmt_time(r["tick"]), r["outcome"] + (" (catch-up)" if r.get("catch_up") else ""), r.get("job") or "",
            r.get("message")] for r in runs])  # fmt: skip


@click.command("create")
@click.argument("name")
@click.option("--cron", required=True, help="Cron expression, e.g. '0 2 * * *' (quote it).")
@click.option("--tz", "timezone", help="IANA time zone of the expression (default UTC).")
@click.option("--overlap", type=click.Choice(["skip", "allow", "cancel_previous"]), help="Default skip.")
@click.option("--disabled", is_flag=True, help="Create it switched off.")
@click.option("-f", "--file", "job_file", metavar="FILE", help="Job file (YAML or JSON) with the API's fields.")
@click.option("--cpu", type=CPU, help="CPU: 0.5, 2 or 500m (default 0.5).")
@click.option("--memory", type=BYTES, help="Memory limit: 256Mi, 1Gi (default 256Mi).")
@click.option("--timeout", type=DURATION, help="300, 5m, 1h30m (default 1h).")
@click.option("--retries", type=int, help="Automatic retries.")
@click.option("--retry-on", metavar="LIST", help="lost,failed,timeout and exit codes (75,128-143).")
@click.option("--env", multiple=True, metavar="K=V", help="Environment variable (repeatable; stored encrypted).")
@click.option("--job-name", help="The submitted jobs' name (default: the schedule's).")
@json_option
@click.argument("image", required=False)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_state
def schedules_create(state, name, cron, timezone, overlap, disabled, job_file, cpu, memory, timeout, retries,
                     retry_on, env, job_name, as_json, image, command):  # fmt: skip
    """Submit IMAGE COMMAND (or the job file) at every tick of a cron expression.

    \b
    euler schedules create nightly --cron '0 2 * * *' --tz Asia/Shanghai alpine:3.20 -- ./rebuild.sh
    """
    file_body = _job_file(job_file) if job_file else None
    if not image and not (file_body or {}).get("image"):
        raise click.UsageError("Missing argument 'IMAGE' (or -f FILE)")
    try:
        env_values = parse_env(env)
    except ParseError as exc:
        raise click.BadParameter(str(exc), param_hint="'--env'") from None
    command = command[1:] if command[:1] == ("--",) else command
    job = job_body(file_body=file_body, image=image, command=list(command), name=job_name or name, cpu_milli=cpu,
                   memory_bytes=memory, timeout_seconds=timeout, max_retries=retries, env=env_values,
                   retry_on=parse_retry_on(retry_on) if retry_on is not None else None)  # fmt: skip
    made = state.client().schedules.create(
        name=name, cron=cron, job=job, timezone=timezone, overlap=overlap, enabled=not disabled
    )
    if as_json:
        return emit_json(made)
    note(f"schedule {made['name']} created; next tick {fmt_time(made.get('next_tick_at')) or 'none'}")


@click.command("delete")
@click.argument("name")
@pass_state
def schedules_delete(state, name):
    """Delete a schedule (the jobs it submitted stay)."""
    state.client().schedules.delete(name)
    note(f"schedule {name} deleted")


def _switch(enabled: bool):
    @click.command("enable" if enabled else "disable")
    @click.argument("name")
    @pass_state
    def switch(state, name):
        made = state.client().schedules.update(name, enabled=enabled)
        note(f"schedule {name} {'enabled; next tick ' + fmt_time(made.get('next_tick_at')) if enabled else 'disabled'}")

    switch.help = "Switch a schedule on (its next tick from now)." if enabled else "Switch a schedule off."
    return switch


schedules = NounGroup("schedules", "Cron schedules of jobs: list (the default), show, create, delete, enable, disable.")
for _command in (schedules_list, schedules_show, schedules_create, schedules_delete, _switch(True), _switch(False)):
    schedules.add_command(_command)


@click.command("list")
@json_option
@pass_state
def webhooks_list(state, as_json):
    """The project's webhooks (owners only)."""
    items = state.client().webhooks.list()
    if as_json:
        return emit_json(items)
    table(["ID", "URL", "EVENTS", "ENABLED", "DESCRIPTION"],
          [[h["id"], h["url"], ",".join(h["events"]), "yes" if h["enabled"] else "no", h.get("description")]
           for h in items])  # fmt: skip


@click.command("create")
@click.argument("url")
@click.option("--events", default="job.ended", show_default=True,
              help="Comma-separated: job.ended, job.state_changed, job.failed, job.<state>.")  # fmt: skip
@click.option("--description")
@json_option
@pass_state
def webhooks_create(state, url, events, description, as_json):
    """Register a webhook; its signing secret is printed this once (stdout)."""
    made = state.client().webhooks.create(
        url=url, events=[e.strip() for e in events.split(",") if e.strip()], description=description
    )
    if as_json:
        return emit_json(made)
    note(f"webhook {made['id']} created for {', '.join(made['events'])}; its secret, shown once:")
    click.echo(made["secret"])


@click.command("delete")
@click.argument("hook_id", type=int)
@pass_state
def webhooks_delete(state, hook_id):
    """Delete a webhook and its delivery log."""
    state.client().webhooks.delete(hook_id)
    note(f"webhook {hook_id} deleted")


@click.command("deliveries")
@click.argument("hook_id", type=int)
@click.option("-n", "--limit", type=int, default=20, show_default=True)
@json_option
@pass_state
def webhooks_deliveries(state, hook_id, limit, as_json):
    """A webhook's delivery log: each delivery and its tries."""
    items = state.client().webhooks.deliveries(hook_id, limit=limit)
    if as_json:
        return emit_json(items)
    rows = []
    for d in items:
        last = (d.get("tries") or [{}])[-1]
        rows.append([d["id"], fmt_time(d["created_at"]), d["event_type"], d["state"], d["attempts"],
                     last.get("status_code") or last.get("error") or "", last.get("latency_ms")])  # fmt: skip
    table(["ID", "CREATED", "EVENT", "STATE", "TRIES", "LAST ANSWER", "MS"], rows)


@click.command("redeliver")
@click.argument("hook_id", type=int)
@click.argument("delivery_id", type=int)
@json_option
@pass_state
def webhooks_redeliver(state, hook_id, delivery_id, as_json):
    """Send a delivery's payload again (a new delivery)."""
    made = state.client().webhooks.redeliver(hook_id, delivery_id)
    emit_json(made) if as_json else note(f"delivery {made['id']} queued (redelivery of {delivery_id})")


webhooks = NounGroup("webhooks", "Signed event deliveries: list (the default), create, delete, deliveries, redeliver.")
for _command in (webhooks_list, webhooks_create, webhooks_delete, webhooks_deliveries, webhooks_redeliver):
    webhooks.add_command(_command)
