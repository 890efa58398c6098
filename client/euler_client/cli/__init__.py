"""The `euler` command: `main()` runs it, turns every error into one line on stderr and an exit status."""

from __future__ import annotations

import os
import sys

from euler_client import __version__


def main(argv: list[str] | None = None) -> None:
    """The console script: run the command, flush what it wrote, exit with its status (without the interpreter's
    teardown: every stream and connection is closed by then, no thread is left to wait for). Called with `argv`
    (tests): the same, but a normal exit (SystemExit)."""
    if argv is None:
        # The console script: the collector would walk the young objects of every module the command imports a
        # few times over; it runs about a thirtieth as often.
        import gc

        gc.set_threshold(20_000, 10, 10)
    status = run(sys.argv[1:] if argv is None else argv)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        _silence_stdout()
        status = status or 141
    if argv is None:
        # The console script: its output is flushed, its files and connections closed, no thread works on. The
        # interpreter's teardown (every module freed, the collector run) only delays the shell: skipped.
        os._exit(status)
    import gc

    gc.freeze()  # what is left is freed by the exit: its collections need not walk every object (~4 ms of CPU)
    sys.exit(status)


def run(args: list[str]) -> int:
    """The command's exit status; every error becomes one line on stderr."""
    if args in (["--version"], ["-V"]):  # the fast path: no CLI framework, no HTTP library
        print(f"euler {__version__}")
        return 0
    from euler_client.errors import EXIT_INTERRUPTED, EulerError

    try:
        if args[:1] == ["run"]:  # the everyday `euler run`, parsed without click when it can be
            from euler_client.cli.runargs import fast_run

            status = fast_run(args[1:])
            if status is not None:
                return status
        return _click(args)
    except EulerError as exc:
        code = f" [{exc.code}]" if exc.status else ""
        return fail(f"{exc.message}{code}", exc.exit_code)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback (EULER_DEBUG=1 shows it)
        if os.environ.get("EULER_DEBUG"):
            raise
        return fail(f"unexpected {type(exc).__name__}: {exc} (EULER_DEBUG=1 shows the traceback)", 1)


def _click(args: list[str]) -> int:
    """The command tree (cli/commands.py); click's own errors become exit 2 (usage) or theirs."""
    import click

    from euler_client.cli.commands import cli
    from euler_client.errors import EXIT_INTERRUPTED, EXIT_USAGE

    try:
        result = cli.main(args=args, prog_name="euler", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except click.exceptions.NoArgsIsHelpError as exc:  # `euler` alone: the help, as click would
        sys.stdout.write(exc.ctx.get_help() + "\n")
        return EXIT_USAGE
    except click.exceptions.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        return fail(exc.format_message() + hint, EXIT_USAGE)
    except click.exceptions.Abort:
        return fail("interrupted", EXIT_INTERRUPTED)
    except click.exceptions.ClickException as exc:
        return fail(exc.format_message(), exc.exit_code or 1)


def fail(message: str, status: int) -> int:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    sys.stderr.write(f"euler: error: {' '.join(str(message).split())}\n")
    sys.stderr.flush()
    return status


def _silence_stdout() -> None:
    """After the reader of our stdout went away: no second error when Python flushes it at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
