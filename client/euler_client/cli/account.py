"""Account commands: `euler login`, `euler usage`, and `euler keys VERB` (list, create, delete)."""

from __future__ import annotations

import sys

import click

from euler_client.cli.base import NounGroup, json_option, pass_state
from euler_client.cli.output import bar, emit_json, fmt_time, note, table


@click.command()
@click.option("--url", envvar="EULER_URL", help="The server, e.g. https://euler.example.com.")
@click.option("--api-key", metavar="KEY", help="The key (euler_pk_...); '-' reads it from stdin; else it is asked.")
@click.option("--profile", "login_profile", metavar="NAME", help="Store under this profile (default: default).")
@pass_state
def login(state, url, api_key, login_profile):
    """Check an API key against the server and store it (~/.config/euler/config.toml, mode 0600)."""
    from euler_client.client import Client
    from euler_client.config import DEFAULT_PROFILE, config_path, write_profile

    if not url:
        url = click.prompt("Server URL", err=True)
    if api_key == "-":
        api_key = sys.stdin.readline().strip()
    elif not api_key:
        api_key = click.prompt("API key", hide_input=True, err=True)
    if not api_key:
        raise click.UsageError("an API key is needed")
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise click.BadParameter(f"{url!r} is not an http:// or https:// URL", param_hint="'--url'")
    with Client(url, api_key) as client:
        project = client.project()
    profile = login_profile or state.profile or DEFAULT_PROFILE
    path = config_path()
    write_profile(path, profile, url=url, api_key=api_key)
    note(f"logged in to {url} as project {project.get('name')!r}; saved as profile {profile!r} in {path}")


_RESOURCES = [
    ("cpu_core_seconds", "CPU", lambda v: f"{v / 3600:,.1f} core-h"),
    ("gpu_seconds", "GPU", lambda v: f"{v / 3600:,.1f} GPU-h"),
    ("invocations", "Calls", lambda v: f"{v:,.0f}"),
    ("concurrent_jobs", "Concurrency", lambda v: f"{v:,.0f} jobs"),
    ("api_keys", "API keys", lambda v: f"{v:,.0f}"),
]


@click.command()
@json_option
@pass_state
def usage(state, as_json):
    """Quota bars for this period: CPU, GPU, calls, concurrency and keys."""
    client = state.client()
    project = client.project()
    figures = dict(project.get("usage") or {})
    running = client.get("jobs", state="assigned,running", page_size=1).get("count", 0)
    figures["concurrent_jobs"] = {**figures.get("concurrent_jobs", {}), "used": running}
    if as_json:
        return emit_json({**project, "usage": figures})
    period = project.get("period") or {}
    click.echo(f"project {project.get('name')}, period {period.get('start', '')} to {period.get('end', '')}")
    rows = []
    for key, label, fmt in _RESOURCES:
        figure = figures.get(key) or {}
        used, limit = float(figure.get("used") or 0), float(figure.get("limit") or 0)
        share = f"{100 * used / limit:.0f}%" if limit else ""
        rows.append([label, bar(used, limit), share, f"{fmt(used)} of {fmt(limit)}"])
    table(["", "", "USED", ""], rows)


@click.command("list")
@json_option
@pass_state
def keys_list(state, as_json):
    """The keys (never their secrets)."""
    items = state.client().keys.list()
    if as_json:
        return emit_json(items)
    table(["ID", "PREFIX", "LABEL", "ACTIVE", "CREATED", "LAST USED"],
          [[k["id"], k.get("prefix"), k.get("label"), "yes" if k.get("active") else "revoked",
            fmt_time(k.get("created_at")), fmt_time(k.get("last_used_at"))] for k in items])  # fmt: skip


@click.command("create")
@click.option("--label", default="", help="A note: what the key is for.")
@json_option
@pass_state
def keys_create(state, label, as_json):
    """Create a key; its secret is printed once, on stdout."""
    key = state.client().keys.create(label)
    if as_json:
        return emit_json(key)
    click.echo(key["key"])
    note(f"key {key['id']} created; this is the only time its secret is shown")


@click.command("delete")
@click.argument("key_id", type=int)
@pass_state
def keys_revoke(state, key_id):
    """Revoke a key: it stops working at once."""
    state.client().keys.revoke(key_id)
    note(f"key {key_id} revoked")


keys = NounGroup("keys", "The project's API keys: list (the default), create, delete.", aliases={"revoke": "delete"})
for _command in (keys_list, keys_create, keys_revoke):
    keys.add_command(_command)
