"""Pure rules about nodes: the GPU fingerprint, the heartbeat interval, names and labels."""

from __future__ import annotations

import hashlib
import json
import random
import re

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
LABEL_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9._-]{0,63}$")
REGION_RE = re.compile(r"^[A-Za-z0-9._-]{0,63}$")
MAX_LABELS = 64


def gpu_identity(gpus: list[dict]) -> list[tuple[str, str, int]]:
    """What is pinned at approval: the set of (uuid, model, memory), ignoring order and live figures."""
    return sorted((str(g.get("uuid", "")), str(g.get("model", "")), int(g.get("memory_bytes", 0))) for g in gpus)


def gpu_fingerprint(gpus: list[dict]) -> str:
    return hashlib.sha256(json.dumps(gpu_identity(gpus)).encode()).hexdigest()


def describe_gpu_change(before: list[dict], after: list[dict]) -> str:
    """A one-line account of how two GPU sets differ, for the NodeEvent."""
    old = {g[0]: g for g in gpu_identity(before)}
    new = {g[0]: g for g in gpu_identity(after)}
    parts = []
    removed = sorted(set(old) - set(new))
    added = sorted(set(new) - set(old))
    changed = sorted(u for u in set(old) & set(new) if old[u] != new[u])
    if removed:
        parts.append("removed " + ", ".join(f"{u} ({old[u][1] or 'unknown model'})" for u in removed))
    if added:
        parts.append("added " + ", ".join(f"{u} ({new[u][1] or 'unknown model'})" for u in added))
    if changed:
        parts.append(
            "changed " + ", ".join(f"{u} ({old[u][1]}, {old[u][2]} B → {new[u][1]}, {new[u][2]} B)" for u in changed)
        )
    return "; ".join(parts) or "no change"


def heartbeat_interval(
    node_count: int,
    *,
    min_interval: float,
    budget: float,
    max_interval: float,
    jitter: float = 0.1,
    rng: random.Random | None = None,
) -> float:
    """Seconds until the next heartbeat: scaled with the node count so that the total rate stays within
    `budget`, the heartbeats/s that the live web processes can take together (Nomad's approach), at most
    `max_interval`, shortened by a random fraction up to `jitter` so that nodes do not beat in step."""
    base = max(min_interval, max(node_count, 0) / max(budget, 1.0))
    base = min(base, max(max_interval, min_interval))
    spread = (rng or random).random() * min(max(jitter, 0.0), 0.9)
    return round(base * (1 - spread), 3)


def poll_wait(interval: float, *, floor: float, cap: float) -> float:
    """The long-poll wait a node is told: its heartbeat interval, so that idle polls (one request per wait) cost
    no more than heartbeats and follow the same nodes ÷ budget; never below `floor` (the protocol's default),
    never above `cap` (an HTTP proxy's read timeout)."""
    return round(min(max(floor, interval), cap), 3)


def offline_window(interval: float | None, *, offline_after: float, missed: int) -> float:
    """How long a node may stay silent before it is offline: EULER_NODE_OFFLINE_AFTER, or `missed` of the
    node's own heartbeat intervals when that is longer (a node told to beat every 20 s is not late at 30 s)."""
    return max(offline_after, missed * (interval or 0.0))


OVERLOAD_NOTICE = 1.0  # seconds of event-loop lag below which a web process is not behind
OVERLOAD_FAR_BELOW = 0.5  # a tier taking less than this share of what the nodes send is far behind


def overload_allowance(
    *,
    lag: float,
    intake_rate: float,
    expected_rate: float,
    cap: float,
    notice: float = OVERLOAD_NOTICE,
    far_below: float = OVERLOAD_FAR_BELOW,
) -> float:
    """Extra seconds of silence every node is allowed while the web tier is behind (a partly overloaded control
    plane: heartbeats wait in a queue, arrive late, and nodes would pass their window though they are alive).

    `lag` is the worst event-loop delay among the live web processes (a heartbeat waits about that long before
    it is heard), `intake_rate` the heartbeats/s they took together lately, `expected_rate` what the online
    nodes send (nodes ÷ interval). A tier answering within `notice` s is healthy: nothing extra. Behind, every
    node gets twice the lag (it grows while we look). Behind *and* taking in less than `far_below` of what the
    nodes send, heartbeats are piling up faster than they are heard: offline marking holds for up to `cap`
    (a dead host is then marked late, never a live one early; past `cap` the windows are as before)."""
    if lag < notice:
        return 0.0
    if expected_rate > 0 and intake_rate < far_below * expected_rate:
        return cap
    return min(2 * lag, cap)


def total_budget(members: list[str], *, own: float) -> float:
    """The live web processes' heartbeat budgets summed, from registry members `"<process>|<budget>"`
    (the latest entry per process counts); `own` when nobody is registered (Redis just came back)."""
    budgets: dict[str, float] = {}
    for member in members:
        proc, _, value = member.rpartition("|")
        try:
            budgets[proc] = float(value)
        except ValueError:
            continue
    return sum(budgets.values()) or own


def resource_fields(res) -> dict:
    """The node row's fields an agent's resources report (`protocol.Resources`) sets, at enrollment and on
    each heartbeat."""
    return {
        "cpu_milli": res.cpu_milli,
        "memory_bytes": res.memory_bytes,
        "gpus": [g.model_dump() for g in res.gpus],
        "docker_version": res.docker_version,
        "disk_bytes": res.disk_bytes,
        "capped": list(res.capped),
        "job_egress": res.job_egress,
        "job_egress_error": res.job_egress_error,
        "allowed_images": list(res.allowed_images),
        "runtimes": [r.model_dump() for r in res.runtimes],
        "lender_min_isolation": res.min_isolation,
    }


PINNED = ("cpu_milli", "memory_bytes", "disk_bytes", "runtimes")  # capacity pinned at approval
PINNED_SETS = frozenset({"runtimes"})  # pinned as a set of entries rather than a ceiling figure


def approved_capacity(node) -> dict:
    """The figures the operator approved ({field: figure or None}: None is not pinned)."""
    return {key: getattr(node, f"approved_{key}") for key in PINNED}


def pin_capacity(fields: dict, approved: dict) -> dict:
    """The row's fields for a report under the capacity pinned at approval: a figure at or below the approved one
    is used as reported (a lender may always offer less); one above it is held at the approved figure and waits
    in `pending_capacity` for an operator. An unknown figure (None: an agent that cannot read its disk) is not
    less than an approved one, which stands. Nothing pinned: the report as it is."""
    out = dict(fields)
    pending = {}
    for key in PINNED:
        ceiling = approved.get(key)
        if ceiling is None or key not in fields:
            continue
        reported = fields[key]
        if key in PINNED_SETS:  # entries the operator approved are offered; a new or changed one waits
            kept = [entry for entry in reported or [] if entry in ceiling]
            if len(kept) < len(reported or []):
                out[key] = kept
                pending[key] = reported
            continue
        if reported is None:
            out[key] = ceiling
        elif reported > ceiling:
            out[key] = ceiling
            pending[key] = reported
    out["pending_capacity"] = pending
    return out


def capacity_to_pin(node) -> dict:
    """What approving a node pins: the figures it reports now, for each figure not pinned yet. A figure an operator
    approved before stays (re-approval after a GPU change, a rejected node approved again): a larger report waits in
    `pending_capacity` for its own action (transitions.node_capacity_approve), never rides along with an approval."""
    return {key: getattr(node, key) for key in PINNED if getattr(node, f"approved_{key}") is None}


def heartbeat_fields(hb, now) -> dict:
    """The node row's fields a heartbeat (`protocol.Heartbeat`) reports; the change fingerprint is computed over
    the same dict (online is not among them: only nodes/transitions.py writes it)."""
    return {"last_heartbeat_at": now, "agent_version": hb.agent_version, **resource_fields(hb.resources)}


def usage(hb) -> dict:
    """What a heartbeat says of live use (to Redis, never the row)."""
    gpus = [{"uuid": g.uuid, "utilization": g.utilization, "memory_used_bytes": g.memory_used_bytes}
            for g in hb.resources.gpus]  # fmt: skip
    return {"gpus": gpus, "running": len(hb.running)}


def running_fp(hb) -> str:
    return running_fingerprint([(r.attempt_id, r.state) for r in hb.running])


def gpus_moved(node, gpus: list[dict]) -> bool:
    """An approved node whose reported GPU set is not the one approved (pinned): it goes back to pending."""
    return bool(node.approval == "approved" and node.gpu_fingerprint and gpu_fingerprint(gpus) != node.gpu_fingerprint)


def change_fingerprint(fields: dict) -> str:
    """What the node row holds of a heartbeat, as one digest: a heartbeat whose digest is unchanged writes no
    row. Computed over the very fields the database write uses, so a field added there folds in; live GPU
    figures (utilisation, memory in use) are left out, they change on every beat and are not capacity."""
    stable = {k: v for k, v in fields.items() if k not in VOLATILE_FIELDS}
    if "gpus" in stable:
        stable["gpus"] = [{k: v for k, v in g.items() if k not in LIVE_GPU_FIGURES} for g in stable["gpus"] or []]
    return hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()[:32]


VOLATILE_FIELDS = frozenset({"last_heartbeat_at", "online"})
LIVE_GPU_FIGURES = frozenset({"utilization", "memory_used_bytes"})


def running_fingerprint(attempt_states: list[tuple[int, str]]) -> str:
    """The attempts a node lists, as one short digest: heartbeat hooks run again when it changes."""
    return hashlib.sha256(json.dumps(sorted(attempt_states)).encode()).hexdigest()[:16]


def hooks_due(*, running_changed: bool, last_run: float | None, now: float, every: float) -> bool:
    """Whether a heartbeat runs the other apps' hooks (database reads): when the listed attempts changed,
    when the last run asked to look again (`last_run` 0), and at least every `every` s."""
    return running_changed or not last_run or now - last_run >= every


def validate_labels(labels) -> str | None:
    """Why these labels are not acceptable, or None."""
    if not isinstance(labels, dict):
        return "labels must be an object of strings"
    if len(labels) > MAX_LABELS:
        return f"at most {MAX_LABELS} labels"
    for key, value in labels.items():
        if not isinstance(key, str) or not LABEL_KEY_RE.match(key):
            return f"label key {key!r}: 1-63 characters of letters, digits, '.', '_', '-', '/'"
        if not isinstance(value, str) or not LABEL_VALUE_RE.match(value):
            return f"label {key!r}: a value is at most 63 letters, digits, '.', '_', '-'"
    return None
