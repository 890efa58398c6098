"""Pure parsers for what people type (`500m`, `1.5`, `256Mi`, `1h30m`, `k=v`) and the job body they build.

No validation the server already does: these only turn text into the API's units; the server decides
whether the amounts are allowed and answers with its own code when not.
"""

from __future__ import annotations

import os

from euler_client.errors import EXIT_NO_EXIT_CODE

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from decimal import Decimal


class ParseError(ValueError):
    """A value that cannot be read; the message says what was expected."""


def _decimal(text: str) -> Decimal | None:
    from decimal import Decimal, InvalidOperation  # only when an amount is given (~3 ms to import)

    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def parse_cpu(text: str) -> int:
    """CPU in millicores: `500m` → 500, `1.5` → 1500, `2` → 2000."""
    raw = str(text).strip()
    milli = raw.endswith("m")
    value = _decimal(raw[:-1] if milli else raw)
    if value is None or value <= 0:
        raise ParseError(f"{text!r} is not a CPU amount (e.g. 0.5, 2 or 500m)")
    result = value if milli else value * 1000
    if result != result.to_integral_value():
        raise ParseError(f"{text!r} is finer than a millicore (e.g. 0.5, 2 or 500m)")
    return int(result)


_BYTE_UNITS = {
    "": 1,
    "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
}  # fmt: skip
# These parsers use no regular expressions: importing `re` costs more than the command's own start-up
# (client/setup.py).
_DIGITS = frozenset("0123456789")


def _size_parts(text: str) -> tuple[str, str] | None:
    """`1.5 Gi B` → ("1.5", "Gi"): a number (digits, at most one point, a digit last), spaces, a unit of
    _BYTE_UNITS, a B right after it; None when the text is not that."""
    body = text.strip()
    body = body[:-1] if body.endswith("B") else body
    unit = body[-2:] if body[-2:] in _BYTE_UNITS else body[-1:] if body[-1:] in _BYTE_UNITS else ""
    number = body[: len(body) - len(unit)].rstrip()
    whole, _, fraction = number.partition(".")
    if not number or not set(whole + fraction) <= _DIGITS or number[-1:] not in _DIGITS:
        return None
    return number, unit


def parse_bytes(text: str) -> int:
    """Bytes, Kubernetes style: `256Mi`, `1Gi`, `1.5Gi`, `500M` (decimal), `1048576`; a trailing B is allowed."""
    parts = _size_parts(str(text))
    if parts is None:
        raise ParseError(f"{text!r} is not a size (e.g. 256Mi, 1Gi, 10G)")
    number, unit = parts
    from decimal import Decimal

    value = Decimal(number) * _BYTE_UNITS[unit]
    if value <= 0 or value != value.to_integral_value():
        raise ParseError(f"{text!r} is not a whole, positive number of bytes (e.g. 256Mi, 1Gi)")
    return int(value)


def _duration_seconds(raw: str) -> int | None:
    """`2d3h4m5s`, each part optional but in that order, each a whole number: its seconds; None if not that."""
    if raw.isdecimal():
        return int(raw)
    seconds, rest = 0, raw
    for unit, scale in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        number, found, after = rest.partition(unit)
        if found:
            if not number.isdecimal():
                return None
            seconds, rest = seconds + int(number) * scale, after
    return seconds if raw and not rest else None


def parse_duration(text: str) -> int:
    """Seconds: `300`, `90s`, `5m`, `1h`, `1h30m`, `2d`; a bare number is seconds."""
    seconds = _duration_seconds(str(text).strip())
    if seconds is None:
        raise ParseError(f"{text!r} is not a duration (e.g. 300, 5m, 1h30m)")
    if seconds <= 0:
        raise ParseError(f"{text!r} is not a positive duration")
    return seconds


def parse_pair(text: str, *, sep: str = "=", what: str = "KEY=VALUE") -> tuple[str, str]:
    key, found, value = str(text).partition(sep)
    if not found or not key.strip():
        raise ParseError(f"{text!r} is not {what}")
    return key.strip(), value


def parse_env(items: list[str] | tuple[str, ...], environ: dict | None = None) -> dict[str, str]:
    """`--env K=V`, or `--env K` to pass K's value from this shell (as `docker run -e K` does)."""
    environ = os.environ if environ is None else environ
    env: dict[str, str] = {}
    for item in items:
        if "=" in item:
            key, value = parse_pair(item)
        elif item and item in environ:
            key, value = item, environ[item]
        else:
            raise ParseError(f"{item!r} is not KEY=VALUE and is not set in this shell")
        env[key] = value
    return env


def parse_env_file(text: str) -> dict[str, str]:
    """A dotenv file: `KEY=VALUE` lines, `#` comments, blank lines, optional `export ` and quotes."""
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, found, value = line.partition("=")
        if not found or not key.strip():
            raise ParseError(f"line {number} is not KEY=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def parse_labels(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    return dict(parse_pair(item, what="k=v") for item in items)


def parse_list(text: str | None) -> list[str]:
    """`lost,failed` → ["lost", "failed"]."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def parse_retry_on(text: str | None) -> list:
    """`lost,failed,75,128-143` → ["lost", "failed", {"exit_codes": [75, "128-143"]}]: endings by name, exit
    codes and ranges by number (the server checks them)."""
    endings: list = []
    codes: list = []
    for part in parse_list(text):
        head = part.split("-", 1)[0]
        if head.isdigit():
            codes.append(int(part) if part.isdigit() else part)
        else:
            endings.append(part)
    return endings + ([{"exit_codes": codes}] if codes else [])


def default_name(image: str) -> str:
    """A job name from its image: `registry:5000/team/trainer:1.2` → `trainer`."""
    last = image.split("@", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return last.split(":", 1)[0] or "job"


# What `euler run` asks for when neither the flags nor the job file say (the API requires these fields).
def parse_gib(text: str) -> float:
    """GiB per GPU: "40", "79.5", "40Gi" or "40GiB" (the API's `min_memory_gib`)."""
    raw = text.strip()
    for suffix in ("GiB", "Gi", "G"):
        if raw.lower().endswith(suffix.lower()):
            raw = raw[: -len(suffix)].strip()
            break
    try:
        value = float(raw)
    except ValueError:
        raise ParseError(f"GPU memory is a number of GiB (40, 79.5, 40Gi), not {text!r}") from None
    if not 0 <= value <= 4096:
        raise ParseError(f"GPU memory is 0 to 4096 GiB, not {text!r}")
    return int(value) if value.is_integer() else value


RUN_DEFAULTS = {"cpu_milli": 500, "memory_bytes": 256 * 2**20, "timeout_seconds": 3600}


def job_body(*, file_body: dict | None = None, image: str | None = None, command: list[str] | None = None,
             **options) -> dict:  # fmt: skip
    """The POST /api/v1/jobs body: the job file's fields, overridden by the flags given (None = not given),
    then RUN_DEFAULTS for required amounts still missing and a name from the image."""
    body = dict(file_body or {})
    if image:
        body["image"] = image
    if command:
        body["command"] = list(command)
    body.update({key: value for key, value in options.items() if value is not None and value != {} and value != []})
    for key, value in RUN_DEFAULTS.items():
        body.setdefault(key, value)
    if "name" not in body and isinstance(body.get("image"), str):
        body["name"] = default_name(body["image"])
    return body


def exit_status(job: dict) -> tuple[int, str]:
    """How `euler run`/`wait` exit for an ended job: its exit code, or EXIT_NO_EXIT_CODE (125) and why it has none."""
    state, reason, code = job.get("state"), job.get("reason") or "", job.get("exit_code")
    if state == "succeeded":
        return (code or 0), ""
    if code is not None and reason in ("exited", ""):
        return int(code), ""
    why = reason or state or "unknown"
    attempts = job.get("attempts") or [{}]
    detail = " ".join(str(attempts[-1].get("message") or "").split())
    return EXIT_NO_EXIT_CODE, f"job {job.get('id')} {state}: {why}" + (f" ({detail})" if detail else "")


def parse_after(text: str) -> dict:
    """`--after JOB[:ended]`: `12`, `12:ended`, `12:succeeded`, `array:7`, `array:7:ended` → a depends_on entry."""
    parts = text.strip().split(":")
    kind = "job"
    if parts and parts[0] in ("array", "job"):
        kind, parts = parts[0], parts[1:]
    if not 1 <= len(parts) <= 2 or not parts[0].isdigit() or int(parts[0]) < 1:
        raise ParseError(f"{text!r} is not JOB[:ended] (e.g. 12, 12:ended, array:7)")
    condition = parts[1] if len(parts) == 2 else "succeeded"
    if condition not in ("succeeded", "ended"):
        raise ParseError(f"{text!r}: the condition is 'succeeded' (default) or 'ended'")
    return {kind: int(parts[0]), "condition": condition}
