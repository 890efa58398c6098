"""Template helpers for the console: quota bars, SVG charts, friendly numbers."""

from __future__ import annotations

from django import template
from django.utils.translation import gettext as _

from console import charts

register = template.Library()


@register.filter
def percent(used, limit) -> float:
    return round(charts.percent(used, limit), 1)


@register.filter
def bar_level(pct) -> str:
    pct = float(pct or 0)
    return "high" if pct >= 90 else "mid" if pct >= 70 else "low"


@register.filter
def compact(value) -> str:
    """1234567 → 1.2M; keeps small numbers exact."""
    if value is None:
        return "—"
    value = float(value)
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}{suffix}"
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


@register.filter
def gib(value) -> str:
    return f"{float(value or 0) / 2**30:.1f}"


@register.filter
def size(value) -> str:
    """Bytes as MiB below 1 GiB, GiB above: 64 MiB, 1.5 GiB."""
    value = float(value or 0)
    if value < 2**30:
        return f"{value / 2**20:.0f} MiB"
    gb = value / 2**30
    return f"{gb:.0f} GiB" if gb == int(gb) else f"{gb:.1f} GiB"


@register.filter
def cores(milli) -> str:
    value = float(milli or 0) / 1000
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}".rstrip("0")


@register.inclusion_tag("console/_chart.html")
def svg_chart(points, title: str, line=None, unit: str = ""):
    return {
        "chart": charts.bar_chart(list(points), line_points=line),
        "title": title,
        "unit": unit,
        "no_data": _("No data yet"),
    }


@register.inclusion_tag("console/_bar.html")
def quota_bar(label: str, used, limit, unit: str = ""):
    pct = round(charts.percent(used, limit), 1)
    return {"label": label, "used": used, "limit": limit, "pct": pct, "unit": unit}


@register.filter
def retry_policy(retry_on) -> str:
    """["lost", {"exit_codes": [75, "128-143"]}] → "lost, exit codes 75, 128-143"."""
    parts = []
    for item in retry_on or []:
        if isinstance(item, dict):
            parts.append("exit codes " + ", ".join(str(code) for code in item.get("exit_codes", [])))
        else:
            parts.append(str(item))
    return ", ".join(parts)
