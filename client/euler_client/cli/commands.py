"""The command tree: `euler <noun> <verb>`, with the everyday verbs (run, logs, cancel, wait) at the top too."""

from __future__ import annotations

import click

from euler_client import __version__
from euler_client.parse import ParseError, parse_bytes, parse_cpu, parse_duration


class State:
    """What every command shares: the chosen profile, and one client made on first use."""

    def __init__(self, profile: str | None):
        self.profile = profile
        self._client = None

    def client(self):
        if self._client is None:
            from euler_client.client import Client
            from euler_client.config import resolve

            settings = resolve(profile=self.profile)
            self._client = Client(settings.url, settings.api_key)
        return self._client


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


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, "--version", "-V", prog_name="euler", message="%(prog)s %(version)s")
@click.option("--profile", envvar="EULER_PROFILE", metavar="NAME", help="Stored account to use (default: default).")
@click.pass_context
def cli(ctx: click.Context, profile: str | None) -> None:
    """Euler: run jobs on the pool, follow them, script them.

    Server and key: EULER_URL and EULER_API_KEY, else the profile stored by `euler login`.
    """
    ctx.obj = State(profile)


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(euler completion bash)"."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    click.echo(cls(cli, {}, "euler", "_EULER_COMPLETE").source())


from euler_client.cli import account, agents, jobs, nodes  # noqa: E402 - they register on `cli`

__all__ = ["cli", "account", "agents", "jobs", "nodes"]
