"""What every command module shares: the per-invocation State, the value types, `--json`, and the noun group.

The bottom of the CLI: it imports no command module, so that they import it and the registry imports them,
with no circle.
"""

from __future__ import annotations

import click

from euler_client.cli.state import State
from euler_client.parse import ParseError, parse_after, parse_bytes, parse_cpu, parse_duration, parse_gib

pass_state = click.make_pass_decorator(State)


class _Parsed(click.ParamType):
    def __init__(self, name: str, parse):
        self.name, self.parse = name, parse

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return self.parse(value)
        except ParseError as exc:
            self.fail(str(exc), param, ctx)


CPU = _Parsed("cpu", parse_cpu)
BYTES = _Parsed("size", parse_bytes)
DURATION = _Parsed("duration", parse_duration)
GIB = _Parsed("gib", parse_gib)
AFTER = _Parsed("dependency", parse_after)


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(f)


class NounGroup(click.Group):
    """`euler NOUN VERB`. The noun alone, or with options only, means `euler NOUN list` (as `euler nodes`
    always did). `aliases` maps an old verb spelling to the verb it now means (`agents add` → `agents
    create`): they still work but are not listed in the help."""

    def __init__(self, name: str, help: str, *, aliases: dict[str, str] | None = None, default: str = "list"):
        super().__init__(name=name, help=help)
        self.aliases = aliases or {}
        self.default = default

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.resilient_parsing:  # shell completion: offer the verbs, not the default's options
            return super().parse_args(ctx, args)
        if not args or (args[0].startswith("-") and args[0] not in ctx.help_option_names):
            args = [self.default, *args]
        return super().parse_args(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order they were added: list and show first
