"""The retry policy, pure: which ended attempts are retried (endings and exit codes) and how long to wait.

`retry_on` is a list of endings (`lost`, `failed`, `timeout`) and at most one `{"exit_codes": [75, "128-143"]}`:
a failed attempt that exited with one of those codes is retried although `failed` is not listed. The wait before
retry number n (1-based) is `initial * factor**(n-1)` capped at `max`, less up to JITTER of it at random, so
that jobs failing together do not come back together; a jittered delay never exceeds `max`.
"""

from __future__ import annotations

from dataclasses import dataclass

ENDINGS = ("lost", "failed", "timeout")
EXIT_CODE_MAX = 255
MAX_EXIT_CODE_ENTRIES = 64
JITTER = 0.2  # the delay lies in [(1 - JITTER) * d, d]
BACKOFF_LIMIT = 24 * 3600.0  # the largest initial or max a job may ask for (seconds)
FACTOR_LIMIT = 10.0


class PolicyError(ValueError):
    """A retry_on or retry_backoff value that cannot be used; `code` is the API's 400 code."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


def _code_range(entry) -> tuple[int, int]:
    if isinstance(entry, int) and not isinstance(entry, bool):
        low = high = entry
    elif isinstance(entry, str) and entry.count("-") == 1:
        a, b = entry.split("-")
        if not (a.strip().isdigit() and b.strip().isdigit()):
            raise PolicyError(f"exit code range {entry[:32]!r} is not 'a-b' with integers.", "invalid_exit_codes")
        low, high = int(a), int(b)
    elif isinstance(entry, str) and entry.strip().isdigit():
        low = high = int(entry)
    else:
        raise PolicyError(
            f"exit code {str(entry)[:32]!r} is neither an integer nor a range 'a-b'.", "invalid_exit_codes"
        )
    if not (0 <= low <= EXIT_CODE_MAX and 0 <= high <= EXIT_CODE_MAX):
        raise PolicyError(f"exit codes lie between 0 and {EXIT_CODE_MAX}, got {entry!r}.", "invalid_exit_codes")
    if low > high:
        raise PolicyError(f"exit code range {entry!r} ends before it starts.", "invalid_exit_codes")
    return low, high


def parse_exit_codes(value) -> list[tuple[int, int]]:
    """The `exit_codes` list as sorted, merged inclusive ranges (PolicyError invalid_exit_codes when bad)."""
    if not isinstance(value, list) or not value or len(value) > MAX_EXIT_CODE_ENTRIES:
        raise PolicyError(
            f"exit_codes is a non-empty list of at most {MAX_EXIT_CODE_ENTRIES} codes or 'a-b' ranges.",
            "invalid_exit_codes",
        )
    merged: list[list[int]] = []
    for low, high in sorted(_code_range(entry) for entry in value):
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return [(low, high) for low, high in merged]


def normalize_retry_on(value) -> list:
    """The stored form: endings in a fixed order, then `{"exit_codes": [...]}` with merged ranges (ints for
    single codes, "a-b" strings for ranges)."""
    message = "retry_on is a list of 'lost', 'failed', 'timeout' and at most one {\"exit_codes\": [75, \"128-143\"]}."
    if not isinstance(value, list):
        raise PolicyError(message, "invalid_retry_on")
    endings: set[str] = set()
    codes = None
    for item in value:
        if isinstance(item, str) and item in ENDINGS:
            endings.add(item)
        elif isinstance(item, dict) and set(item) == {"exit_codes"} and codes is None:
            codes = parse_exit_codes(item["exit_codes"])
        else:
            raise PolicyError(message, "invalid_retry_on")
    out: list = sorted(endings, key=ENDINGS.index)
    if codes is not None:
        out.append({"exit_codes": [low if low == high else f"{low}-{high}" for low, high in codes]})
    return out


def exit_code_ranges(retry_on) -> list[tuple[int, int]]:
    for item in retry_on or []:
        if isinstance(item, dict) and "exit_codes" in item:
            return parse_exit_codes(item["exit_codes"])
    return []


def retry_reason(*, retry_on, category: str | None, reason: str | None, exit_code: int | None) -> str | None:
    """Why an ended attempt is retried ("failed", "exit code 75 matched 75"), or None when it is not.

    `category` is jobs.states.retry_category's answer (lost, failed, timeout or None)."""
    if category is None:
        return None
    if category in (retry_on or []):
        return category
    if category == "failed" and reason in (None, "", "exited") and exit_code is not None:
        for low, high in exit_code_ranges(retry_on):
            if low <= exit_code <= high:
                matched = str(low) if low == high else f"{low}-{high}"
                return f"exit code {exit_code} matched {matched}"
    return None


@dataclass(frozen=True)
class Backoff:
    initial: float
    factor: float
    max: float


def parse_backoff(value, *, default: Backoff) -> Backoff:
    """`{"initial": s, "factor": f, "max": s}`, each optional (the operator's defaults fill the rest)."""
    if value is None:
        return default
    if not isinstance(value, dict) or not set(value) <= {"initial", "factor", "max"}:
        raise PolicyError("retry_backoff is an object with initial, factor and max.", "invalid_retry_backoff")
    out = {"initial": default.initial, "factor": default.factor, "max": default.max}
    for key, val in value.items():
        if isinstance(val, bool) or not isinstance(val, int | float):
            raise PolicyError(f"retry_backoff.{key} must be a number.", "invalid_retry_backoff")
        out[key] = float(val)
    if "max" not in value:
        out["max"] = max(out["max"], out["initial"])  # a larger initial than the default cap raises the cap
    if not 0 <= out["initial"] <= BACKOFF_LIMIT or not 0 <= out["max"] <= BACKOFF_LIMIT:
        raise PolicyError(f"retry_backoff initial and max lie between 0 and {BACKOFF_LIMIT:g} s.",
                          "invalid_retry_backoff")  # fmt: skip
    if not 1 <= out["factor"] <= FACTOR_LIMIT:
        raise PolicyError(f"retry_backoff.factor lies between 1 and {FACTOR_LIMIT:g}.", "invalid_retry_backoff")
    if out["max"] < out["initial"]:
        raise PolicyError("retry_backoff.max is at least its initial.", "invalid_retry_backoff")
    return Backoff(**out)


def backoff_delay(*, retry_number: int, backoff: Backoff, u: float) -> float:
    """Seconds before retry number `retry_number` (1-based); `u` in [0, 1) is the jitter draw."""
    exponent = max(0, min(retry_number - 1, 64))
    base = min(backoff.max, backoff.initial * backoff.factor**exponent)
    return round(base * (1.0 - JITTER * min(max(u, 0.0), 1.0)), 3)
