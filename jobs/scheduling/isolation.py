"""Isolation tiers in scheduling (pure): which jobs need a sandbox on which node, and which runtime they get.

A job needs a sandbox on a node when it asks for one (`isolation: "sandbox"`) or when the node's trust level's
minimum (EULER_TRUST_MIN_ISOLATION) or its lender's (EULER_NODE_MIN_ISOLATION) says so. A node gives one when it
offers a sandboxed runtime (gVisor's runsc) that runs the job's network: on an engine whose runsc entry is
registered with `--network=none`, only jobs with network "none". A node whose agent reports no runtimes (an
older agent) runs the engine's default, runc, and never a job that needs a sandbox.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

RUNC = "runc"
SANDBOX = "sandbox"
LEVELS = (RUNC, SANDBOX)
TRUST_LEVELS = ("platform", "community", "untrusted")
DEFAULT_TRUST_MIN = {"platform": RUNC, "community": SANDBOX, "untrusted": RUNC}


@dataclass(frozen=True, slots=True)
class Runtime:
    name: str
    sandbox: bool = False
    networks: frozenset[str] = frozenset({"none", "default"})
    default: bool = False


def parse_trust_min(text: str | None) -> dict[str, str]:
    """`EULER_TRUST_MIN_ISOLATION`: `trust=level` pairs, comma-separated; trust levels not named keep their
    default (community → sandbox, platform and untrusted → runc). ValueError names what is wrong."""
    out = dict(DEFAULT_TRUST_MIN)
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        trust, sep, level = (part.strip().lower() for part in item.partition("="))
        if not sep or trust not in TRUST_LEVELS or level not in LEVELS:
            raise ValueError(
                f"EULER_TRUST_MIN_ISOLATION: {item!r} is not trust=level (trust: {', '.join(TRUST_LEVELS)}; "
                f"level: {', '.join(LEVELS)})"
            )
        out[trust] = level
    return out


def runtimes_from(rows: Iterable[Mapping] | None) -> tuple[Runtime, ...]:
    """A node row's `runtimes` (protocol.RuntimeInfo dicts) as snapshots."""
    return tuple(
        Runtime(
            name=str(r.get("name", "")),
            sandbox=bool(r.get("sandbox")),
            networks=frozenset(r.get("networks") or ()),
            default=bool(r.get("default")),
        )
        for r in rows or ()
        if r.get("name")
    )


def node_minimum(trust: str, lender: str, table: Mapping[str, str]) -> str:
    """The least isolation any job gets on a node: its trust level's, or its lender's when stronger."""
    level = table.get(trust, SANDBOX)  # an unknown trust level is treated as the least trusted
    return SANDBOX if SANDBOX in (level, lender) else RUNC


def needs_sandbox(*, job_isolation: str, node_minimum: str) -> bool:
    return SANDBOX in (job_isolation, node_minimum)


def pick(runtimes: tuple[Runtime, ...], *, sandbox: bool, networked: bool) -> Runtime | None:
    """The runtime a job runs under on a node offering `runtimes`: a sandbox when it needs one, else runc (the
    engine's default first); only one that runs the job's network. None: none fits."""
    network = "default" if networked else "none"
    best = None
    for r in runtimes:
        if network not in r.networks or (sandbox and not r.sandbox):
            continue
        rank = (r.sandbox != sandbox, not r.default, r.name)
        if best is None or rank < best[0]:
            best = (rank, r)
    return best[1] if best else None


def reject(runtimes: tuple[Runtime, ...], *, sandbox: bool, networked: bool) -> str | None:
    """Why a node cannot run the job in the isolation it needs (a reason name of filters.STATIC_PHRASES) or None."""
    if not runtimes:  # an older agent: the engine's default (runc), every network
        return "isolation" if sandbox else None
    if pick(runtimes, sandbox=sandbox, networked=networked) is not None:
        return None
    if sandbox and any(r.sandbox for r in runtimes):
        return "sandbox_network"
    return "isolation" if sandbox else "runtime"


def choose(runtimes: tuple[Runtime, ...], *, sandbox: bool, networked: bool) -> str:
    """The runtime's name for the assignment ("": the engine's default, on a node that reports none)."""
    found = pick(runtimes, sandbox=sandbox, networked=networked)
    return found.name if found is not None else ""
