"""What `make test-deploy` keeps when it fails, and what it removes whatever happens.

Kept: every service's compose log (node agent included) of every stack, the job containers' own logs, and the
test's figures, under `var/test-deploy/<UTC timestamp>/<project>/`; the path is printed. Removed: the job containers
that a stack's node agent created on the host's engine (they are not part of the compose project, so `down` leaves
them), found by the agent's owner label read from its state volume before `down` removes it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.deploy.stack import ROOT, Stack, run

KEEP_ROOT = ROOT / "var" / "test-deploy"


def evidence_dir(now: float | None = None) -> Path:
    return KEEP_ROOT / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


def keep(stacks: list[Stack], figures: dict[str, str], *, into: Path) -> Path:
    """Write the evidence of a failed run into `into` (created); returns it. Never raises for one stack's trouble:
    what can be read is kept, what cannot is said in its file."""
    into.mkdir(parents=True, exist_ok=True)
    (into / "figures.json").write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n")
    for stack in stacks:
        folder = into / stack.project
        folder.mkdir(exist_ok=True)
        listed = stack.compose("--profile", "node", "config", "--services", check=False, timeout=120)
        for service in sorted(set(listed.stdout.split())):
            out = stack.compose(
                "--profile", "node", "logs", "--no-color", "--timestamps", service, check=False, timeout=300
            )
            (folder / f"{service}.log").write_text(out.stdout + (f"\n--- stderr\n{out.stderr}" if out.stderr else ""))
        for cid in job_containers(stack.node_owner()):
            out = run(["docker", "logs", "--timestamps", cid], check=False, timeout=120)
            (folder / f"job-{cid[:12]}.log").write_text(out.stdout + out.stderr)
    return into


def job_containers(owner: str | None) -> list[str]:
    """Ids of the containers a node agent of this identity created (all states)."""
    if not owner:
        return []
    out = run(["docker", "ps", "-aq", "--no-trunc", "--filter", f"label=euler.owner={owner}"], check=False)
    return out.stdout.split()


def remove_job_containers(owner: str | None) -> list[str]:
    found = job_containers(owner)
    if found:
        run(["docker", "rm", "-f", *found], check=False, timeout=300)
    return found
