"""The command registry and the root `euler` group: `euler NOUN VERB`, with run, logs and cancel at the top.

Each command lives in its module (run, jobs, nodes, agents, account) and is found here by name, imported only
when it is used: `euler --help` reads the one-line help from the table below and imports no command module,
`euler run` imports only `cli.run`. The command modules import `cli.base`, never this module, so there is no
circle. To add a command, write it in its module and add one line to COMMANDS.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import click

from euler_client import __version__
from euler_client.cli.base import State

__all__ = ["COMMANDS", "State", "cli"]


@dataclass(frozen=True)
class Entry:
    target: str  # "module:attribute" of the click command
    help: str  # the line `euler --help` shows (without importing the module)
    section: str = "Commands"
    hidden: bool = False  # an old spelling: works, not listed


COMMANDS: dict[str, Entry] = {
    "run": Entry(
        "euler_client.cli.run:run", "Run an image on the pool, show its output, exit with its code.", "Shortcuts"
    ),
    "logs": Entry("euler_client.cli.jobs:logs", "Print a job's output (-f follows it).", "Shortcuts"),
    "cancel": Entry("euler_client.cli.jobs:cancel", "Cancel jobs.", "Shortcuts"),
    "outputs": Entry("euler_client.cli.outputs:outputs", "List a job's output files."),
    "download": Entry(
        "euler_client.cli.outputs:download", "Download a job's output files (sha256 checked), or --checkpoint."
    ),
    "checkpoints": Entry("euler_client.cli.outputs:checkpoints", "List a job's checkpoints."),
    "jobs": Entry("euler_client.cli.jobs:jobs", "Jobs: list (default), show, run, logs, cancel, wait, retry."),
    "arrays": Entry("euler_client.cli.arrays:arrays", "Job arrays: list (default), show, tasks, cancel, retry, wait."),
    "nodes": Entry("euler_client.cli.nodes:nodes", "Nodes: list (default), show, token."),
    "agents": Entry("euler_client.cli.agents:agents", "Agents: list (default), show, create, delete, invoke."),
    "schedules": Entry(
        "euler_client.cli.workflows:schedules", "Cron schedules: list (default), show, create, delete, enable, disable."
    ),
    "webhooks": Entry(
        "euler_client.cli.workflows:webhooks", "Webhooks: list (default), create, delete, deliveries, redeliver."
    ),
    "keys": Entry("euler_client.cli.account:keys", "API keys: list (default), create, delete."),
    "login": Entry("euler_client.cli.account:login", "Check an API key and store it in a profile.", "Account"),
    "usage": Entry("euler_client.cli.account:usage", "Quota bars for this period.", "Account"),
    "completion": Entry("euler_client.cli.commands:completion", "Print the shell completion script.", "Account"),
    # old spellings, kept working: `euler jobs wait|retry` now
    "wait": Entry("euler_client.cli.jobs:wait", "Wait for a job to end.", hidden=True),
    "retry": Entry("euler_client.cli.jobs:retry", "Queue an ended job again.", hidden=True),
}


def load(name: str) -> click.Command | None:
    entry = COMMANDS.get(name)
    if entry is None:
        return None
    module, _, attribute = entry.target.partition(":")
    return getattr(importlib.import_module(module), attribute)


class Registry(click.Group):
    """A root group whose commands come from COMMANDS, imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, entry in COMMANDS.items() if not entry.hidden]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for name in self.list_commands(ctx):
            entry = COMMANDS[name]
            sections.setdefault(entry.section, []).append((name, entry.help))
        for section, rows in sections.items():
            with formatter.section(section):
                formatter.write_dl(rows)


@click.group(
    cls=Registry,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    no_args_is_help=True,
)
@click.version_option(__version__, "--version", "-V", prog_name="euler", message="%(prog)s %(version)s")
@click.option("--profile", envvar="EULER_PROFILE", metavar="NAME", help="Stored account to use (default: default).")
@click.pass_context
def cli(ctx: click.Context, profile: str | None) -> None:
    """Euler: run jobs on the pool, follow them, script them.  euler NOUN VERB, e.g. euler jobs list.

    Server and key: EULER_URL and EULER_API_KEY, else the profile stored by `euler login`.
    """
    ctx.obj = State(profile)
    ctx.call_on_close(ctx.obj.close)


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(euler completion bash)"."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    click.echo(cls(cli, {}, "euler", "_EULER_COMPLETE").source())
