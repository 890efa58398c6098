"""`euler classes`: the operator's priority classes, and which your project's jobs may ask for."""

from __future__ import annotations

import click

from euler_client.cli.base import json_option, pass_state
from euler_client.cli.output import emit_json, table


@click.command()
@json_option
@pass_state
def classes(state, as_json):
    """Priority classes, highest first: which your jobs may ask for (`euler run --priority-class NAME`)."""
    items = state.client().get("priority-classes")
    if as_json:
        return emit_json(items)
    rows = [
        [c["name"], str(c["value"]), "yes" if c["allowed"] else "no", "default" if c["default"] else "",
         c.get("description") or ""]
        for c in items
    ]  # fmt: skip
    table(["NAME", "VALUE", "ALLOWED", "", "DESCRIPTION"], rows)
