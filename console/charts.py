"""Small SVG charts as plain geometry: the template draws what these functions compute."""

from __future__ import annotations

from dataclasses import dataclass


def percent(used: float | None, limit: float | None) -> float:
    """How full a bar is, 0–100; a zero or missing limit reads as full when anything is used."""
    used = float(used or 0)
    limit = float(limit or 0)
    if limit <= 0:
        return 100.0 if used > 0 else 0.0
    return max(0.0, min(100.0, used * 100.0 / limit))


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    value: float


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    line: str  # SVG polyline points for the second series, "" when there is none
    peak: float
    first_label: str
    last_label: str

    @property
    def empty(self) -> bool:
        return not self.bars or self.peak <= 0


def bar_chart(
    points: list[tuple[str, float]],
    *,
    line_points: list[float] | None = None,
    width: int = 600,
    height: int = 140,
    gap: float = 2.0,
) -> Chart:
    """Bars for `points` (label, value) scaled to the highest value; an optional line over the same x axis."""
    values = [max(0.0, float(v or 0)) for _, v in points]
    line_values = [max(0.0, float(v or 0)) for v in (line_points or [])]
    peak = max(values + line_values, default=0.0)
    n = len(points)
    bars: list[Bar] = []
    slot = width / n if n else width
    for i, ((label, _), value) in enumerate(zip(points, values, strict=True)):
        h = (value / peak) * (height - 4) if peak else 0.0
        bars.append(
            Bar(
                x=round(i * slot + gap / 2, 2),
                y=round(height - h, 2),
                width=round(max(slot - gap, 1), 2),
                height=round(h, 2),
                label=label,
                value=value,
            )
        )
    line = ""
    if line_values and peak:
        coords = []
        for i, value in enumerate(line_values):
            x = round(i * slot + slot / 2, 2)
            y = round(height - (value / peak) * (height - 4), 2)
            coords.append(f"{x},{y}")
        line = " ".join(coords)
    return Chart(
        width=width,
        height=height,
        bars=bars,
        line=line,
        peak=peak,
        first_label=points[0][0] if points else "",
        last_label=points[-1][0] if points else "",
    )


def daily_series(rows: list[tuple[object, float]], days: list[object]) -> list[tuple[str, float]]:
    """Fill the gaps: every day in `days` gets a value, 0 where `rows` (day, value) has none."""
    by_day: dict[object, float] = {}
    for day, value in rows:
        by_day[day] = by_day.get(day, 0.0) + float(value or 0)
    return [(day.isoformat() if hasattr(day, "isoformat") else str(day), by_day.get(day, 0.0)) for day in days]
