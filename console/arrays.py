"""Console presentation of job arrays: one row per array with a progress bar, and the array's page."""

from __future__ import annotations

PARTS = (("succeeded", "ok"), ("failed", "bad"), ("lost", "bad"), ("running", "run"), ("assigned", "run"),
         ("queued", "queue"))  # fmt: skip


def progress(counts: dict, count: int) -> dict:
    """The bar's segments (class, percent) and the figures shown beside it."""
    segments: dict[str, float] = {}
    for state, css in PARTS:
        segments[css] = segments.get(css, 0.0) + (100.0 * counts.get(state, 0) / count if count else 0.0)
    return {
        "segments": [(css, round(pct, 2)) for css, pct in segments.items() if pct > 0],
        "succeeded": counts.get("succeeded", 0),
        "failed": counts.get("failed", 0) + counts.get("lost", 0),
        "running": counts.get("running", 0) + counts.get("assigned", 0),
        "queued": counts.get("queued", 0),
        "waiting": counts.get("waiting", 0),
        "cancelled": counts.get("cancelled", 0),
        "count": count,
    }


def rows(arrays: list) -> list[dict]:
    """The list's array rows: each array with its state and progress, in one grouped query."""
    from jobs import deps, workflow

    counts = deps.counts_of([a.pk for a in arrays])
    return [
        {
            "array": a,
            "state": workflow.array_state(counts[a.pk], a.count),
            "progress": progress(counts[a.pk], a.count),
            "created_at": a.created_at,
        }
        for a in arrays
    ]
