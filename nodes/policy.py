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
    max_rate: float,
    offline_after: float,
    jitter: float = 0.1,
    rng: random.Random | None = None,
) -> float:
    """Seconds until the next heartbeat: scaled with the node count so that the total rate stays near
    `max_rate` (Nomad's approach), never longer than half the offline window, shortened by a random
    fraction up to `jitter` so that nodes do not beat in step."""
    base = max(min_interval, max(node_count, 0) / max_rate)
    base = min(base, offline_after / 2)
    spread = (rng or random).random() * min(max(jitter, 0.0), 0.9)
    return round(base * (1 - spread), 3)


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
