"""Presentation helpers shared by console views: translated labels for quota figures."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

QUOTA_LABELS = {
    "cpu_core_seconds": (_("CPU core-hours"), 3600.0),
    "gpu_seconds": (_("GPU-hours"), 3600.0),
    "invocations": (_("Agent calls"), 1.0),
    "api_keys": (_("API keys"), 1.0),
    "output_bytes": (_("Stored job outputs (GiB)"), 1024.0**3),
}


def quota_rows(summary: dict) -> list[dict]:
    """The bars of a project summary, in display units (hours rather than seconds)."""
    rows = []
    for name, (label, divisor) in QUOTA_LABELS.items():
        figure = summary["usage"].get(name)
        if not figure:
            continue
        rows.append(
            {
                "name": name,
                "label": label,
                "used": round(float(figure.get("used") or 0) / divisor, 2),
                "limit": round(float(figure["limit"]) / divisor, 2),
            }
        )
    return rows


def node_command(*, public_url: str, token: str) -> str:
    """The exact command that starts a node agent enrolling with `token` (shown once beside it)."""
    return f"EULER_CONTROL_PLANE_URL={public_url.rstrip('/')} EULER_ENROLLMENT_TOKEN={token} ./euler-node"
