"""`euler-node reclaim [--grace S]` and `euler-node resume`: the lender takes this machine back from the pool, or
gives it again, from the host, with the node's own credential (the agent's state dir). The server stops the jobs
running here (SIGTERM, their grace, SIGKILL) and requeues them elsewhere; the agent, running or not, needs no
restart. A node lifts only its own reclaim: one its lender made in the console or API, or the operator's, stays.

Exit codes: 0 done, 1 refused by the server (the reason on stderr), 2 unreachable, 78 configuration.
"""

from __future__ import annotations

import argparse
import json
import sys

from nodeagent import protocol, state
from nodeagent.client import ControlPlaneClient, Refused, Unreachable
from nodeagent.config import ConfigError, load

EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_CONFIG = 1, 2, 78
COMMANDS = ("reclaim", "resume")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="euler-node", description="Take this machine back from Euler, or give it.")
    sub = parser.add_subparsers(dest="command", required=True)
    reclaim = sub.add_parser("reclaim", help="no new jobs here; stop the running ones (with their grace) elsewhere")
    reclaim.add_argument(
        "--grace", type=int, default=None, metavar="S", help="seconds between SIGTERM and SIGKILL (default: each job's)"
    )
    reclaim.add_argument("--json", action="store_true", help="print the server's answer as JSON")
    resume = sub.add_parser("resume", help="accept jobs again (lifts this node's own reclaim)")
    resume.add_argument("--json", action="store_true", help="print the server's answer as JSON")
    return parser.parse_args(argv)


def body_for(args: argparse.Namespace) -> dict:
    return {"grace": args.grace} if args.command == "reclaim" and args.grace is not None else {}


def describe(answer: dict, command: str) -> str:
    name = answer.get("name", "this node")
    if command == "resume":
        if answer.get("reclaimed"):
            return f"{name} is still reclaimed (by its {answer.get('reclaimed_by')})"
        return f"{name} accepts jobs again"
    return f"{name} reclaimed: {answer.get('stopped', 0)} running jobs stopping and requeued elsewhere; no new jobs"


def main(argv: list[str], env=None) -> int:
    args = parse(argv)
    try:
        config = load(env)
    except ConfigError as exc:
        print(f"euler-node: configuration: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    credential = state.load_credential(config.state_dir)
    if not credential:
        print(f"euler-node: no node credential in {config.state_dir}: enroll this node first", file=sys.stderr)
        return EXIT_CONFIG
    client = ControlPlaneClient(
        config.url, credential=credential, allow_insecure=config.allow_insecure, ca_file=config.ca_file
    )
    path = protocol.PATH_RECLAIM if args.command == "reclaim" else protocol.PATH_RESUME
    try:
        answer = client.call("POST", path, body_for(args), timeout=30)
    except Refused as exc:
        print(f"euler-node: {args.command} refused ({exc.status} {exc.code}): {exc.body.get('message') or exc.body.get('detail', '')}",
              file=sys.stderr)  # fmt: skip
        return EXIT_REFUSED
    except Unreachable as exc:
        print(f"euler-node: the control plane did not answer: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    finally:
        client.close()
    print(json.dumps(answer) if args.json else describe(answer, args.command))
    return 0
