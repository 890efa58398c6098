"""Pure rules of outputs and inputs: the shape of a submission's `outputs` and `inputs_from`, the paths a manifest
may name, which files a manifest plan takes (the job's cap, the project's quota), and HTTP byte ranges.

Plain functions over plain data; each refusal is an InvalidInput with a stable code."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from euler.errors import InvalidInput
from nodeagent import protocol

MAX_OUTPUT_PATHS = 32
MAX_INPUTS = 32
_CONTENT_RANGE = re.compile(r"^bytes (\d{1,19})-(\d{1,19})/(\d{1,19})$")
_RANGE = re.compile(r"^bytes=(\d{0,19})-(\d{0,19})$")


def _printable(text: str) -> bool:
    """No control character (C0, DEL, C1) and no lone surrogate: what the agent keeps (and PostgreSQL can store)."""
    return not any(unicodedata.category(c) in ("Cc", "Cs") for c in text)


def shown(name: str, limit: int = 200) -> str:
    """A name as a refusal message may quote it: control characters and lone surrogates escaped, bounded."""
    text = name.encode("utf-8", "backslashreplace").decode()
    return "".join(c if unicodedata.category(c) != "Cc" else c.encode("unicode_escape").decode() for c in text)[:limit]


def container_path(value, *, what: str, code: str) -> str:
    """An absolute path in the container: '/'-separated, no '.', '..' or empty parts, printable, not '/' itself."""
    if not isinstance(value, str) or not value.startswith("/"):
        raise InvalidInput(f"{what} must be an absolute path in the container, e.g. /out.", code=code)
    path = value[:-1] if value.endswith("/") and len(value) > 1 else value
    parts = path[1:].split("/")
    if len(path) > protocol.MAX_OUTPUT_PATH_CHARS or not _printable(path):
        raise InvalidInput(f"{what} is at most {protocol.MAX_OUTPUT_PATH_CHARS} printable characters.", code=code)
    if path == "/" or any(p in ("", ".", "..") for p in parts):
        raise InvalidInput(f"{what} {path[:80]!r} must name a path below '/' without '.', '..' or '//'.", code=code)
    return path


def output_path(value) -> str | None:
    """A manifest's relative path, as the protocol defines it; None when it is not one (refused `bad_name`)."""
    if not isinstance(value, str) or not 1 <= len(value) <= protocol.MAX_OUTPUT_PATH_CHARS:
        return None
    if value.startswith("/") or not _printable(value) or "\\" in value:
        return None
    if any(p in ("", ".", "..") for p in value.split("/")):
        return None
    return value


def outputs(value, *, default_bytes: int, max_bytes: int) -> dict | None:
    """`outputs`: a list of paths, or {"paths": [...], "max_bytes": N}; stored as the latter (None: none)."""
    code = "invalid_outputs"
    if value is None:
        return None
    if isinstance(value, list):
        value = {"paths": value}
    if not isinstance(value, dict) or set(value) - {"paths", "max_bytes"}:
        raise InvalidInput('outputs is a list of paths or {"paths": [...], "max_bytes": N}.', code=code)
    paths = value.get("paths")
    if not isinstance(paths, list) or not 1 <= len(paths) <= MAX_OUTPUT_PATHS:
        raise InvalidInput(f"outputs.paths is a list of 1 to {MAX_OUTPUT_PATHS} paths.", code=code)
    clean = [container_path(p, what="an output path", code=code) for p in paths]
    if len(set(clean)) != len(clean):
        raise InvalidInput("outputs.paths names a path twice.", code=code)
    cap = value.get("max_bytes", default_bytes)
    if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= max_bytes:
        raise InvalidInput(f"outputs.max_bytes must be an integer between 1 and {max_bytes}.", code=code)
    return {"paths": clean, "max_bytes": cap}


def inputs_from(value) -> list[dict]:
    """`inputs_from`: [{"job": ID, "path": "out/model.bin", "to": "/in/model.bin"}], at most MAX_INPUTS."""
    code = "invalid_inputs_from"
    if not isinstance(value, list) or len(value) > MAX_INPUTS:
        raise InvalidInput(f"inputs_from is a list of at most {MAX_INPUTS} inputs.", code=code)
    clean = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"job", "path", "to"}:
            raise InvalidInput('Each input is {"job": ID, "path": "…", "to": "/in/…"}.', code=code)
        job = item["job"]
        if isinstance(job, bool) or not isinstance(job, int) or job < 1:
            raise InvalidInput("inputs_from.job is a job id.", code=code)
        path = output_path(item["path"])
        if path is None:
            raise InvalidInput("inputs_from.path is an output's relative path, as `euler outputs` lists it.", code=code)
        clean.append({"job": job, "path": path, "to": container_path(item["to"], what="inputs_from.to", code=code)})
    if len({i["to"] for i in clean}) != len(clean):
        raise InvalidInput("Two inputs go to the same path.", code=code)
    return clean


# --- the plan of a manifest ----------------------------------------------------------------------------------
# Each stored output file counts at least this many bytes against the project's output quota (Quota.output_bytes):
# an empty file costs a row and a store entry like a small one, so a flood of empty files runs into the quota too.
FILE_CHARGE_MIN_BYTES = 4096


def charge(size: int) -> int:
    """What a file of `size` bytes counts against the project's output quota."""
    return max(size, FILE_CHARGE_MIN_BYTES)


def declared_bases(paths: list[str]) -> frozenset[str]:
    """The first part of every name a manifest may list: each declared path's last part (`/out/logs` → `logs`), as
    the agent names what it collects (nodeagent/outputs/rules.py `declared_base`)."""
    return frozenset(p.rstrip("/").rsplit("/", 1)[-1] for p in paths)


@dataclass(frozen=True)
class Decision:
    accepted: list[protocol.OutputFile]
    refused: list[protocol.OutputSkip]


def _bad_name(f: protocol.OutputFile, message: str) -> protocol.OutputSkip:
    return protocol.OutputSkip(path=shown(f.path), reason="bad_name", message=message)


def plan(files: list[protocol.OutputFile], *, declared: list[str], job_cap: int, quota_left: int) -> Decision:
    """Take files in manifest order while they fit both the job's cap (bytes) and what the project's quota has left
    (`charge`d bytes); a file that does not fit is refused (`job_cap` or `quota`) and later, smaller ones may still
    fit. Refused `bad_name`: not a valid relative path, a path twice, a name outside the declared paths (the server
    re-checks what an honest agent does: a modified one could name `.git/config` or `.bashrc`, which a download
    into the tenant's directory would write), or a file under another file's name (`out/a` and `out/a/b`)."""
    bases = declared_bases(declared)
    accepted, refused, named, files_seen, dirs_seen, total, charged = [], [], set(), set(), set(), 0, 0
    for f in files:
        if output_path(f.path) is None or f.path in named:
            refused.append(_bad_name(f, "not a valid, unique relative path"))
            continue
        named.add(f.path)
        parts = f.path.split("/")
        if parts[0] not in bases:
            listed = ", ".join(sorted(bases))[:200]
            refused.append(_bad_name(f, f"outside the declared outputs (names start with {listed})"))
            continue
        parents = {"/".join(parts[:i]) for i in range(1, len(parts))}
        if f.path in dirs_seen or parents & files_seen:
            refused.append(_bad_name(f, "a file and a directory of the same name"))
            continue
        if total + f.size > job_cap:
            refused.append(protocol.OutputSkip(path=f.path, reason="job_cap",
                                               message=f"over the job's output cap of {job_cap} bytes"))  # fmt: skip
            continue
        if charged + charge(f.size) > quota_left:
            refused.append(protocol.OutputSkip(path=f.path, reason="quota",
                                               message="over the project's output storage quota"))  # fmt: skip
            continue
        files_seen.add(f.path)
        dirs_seen |= parents
        total += f.size
        charged += charge(f.size)
        accepted.append(f)
    return Decision(accepted, refused)


# --- byte ranges ---------------------------------------------------------------------------------------------
def content_range(header: str | None) -> tuple[int, int, int] | None:
    """`Content-Range: bytes START-END/SIZE` of a chunk upload as (start, end inclusive, size); None if malformed."""
    m = _CONTENT_RANGE.match(header or "")
    if not m:
        return None
    start, end, size = (int(g) for g in m.groups())
    if start > end or end >= size:
        return None
    return start, end, size


class Unsatisfiable(Exception):
    """416: the range lies wholly past the end of the file."""


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The one range of a `Range: bytes=…` header as (start, end inclusive); None: serve the whole file (no header,
    a header we do not read, such as several ranges). Raises Unsatisfiable (416)."""
    m = _RANGE.match((header or "").strip())
    if not m:
        return None
    first, last = m.groups()
    if first == "" and last == "":
        return None
    if first == "":  # the last N bytes
        n = int(last)
        if n == 0:
            raise Unsatisfiable()
        return max(0, size - n), size - 1
    start = int(first)
    end = size - 1 if last == "" else min(int(last), size - 1)
    if last != "" and int(last) < start:
        return None  # invalid: ignored, as RFC 9110 says
    if start >= size:
        raise Unsatisfiable()
    return start, end
