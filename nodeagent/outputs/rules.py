"""The pure part of output collection: names, tar member kinds, caps and the outcome (no Docker, no I/O)."""

from __future__ import annotations

import posixpath
import tarfile
import unicodedata
from dataclasses import dataclass, field

from nodeagent import protocol

# Why an entry was not kept (OutputSkip.reason).
SYMLINK, DEVICE, SPECIAL = "symlink", "device", "special"
NOT_UTF8, BAD_NAME, TOO_MANY = "not_utf8", "bad_name", "too_many_files"
JOB_CAP, SPOOL_CAP, MISSING = "job_cap", "spool_cap", "missing"


class BadName(ValueError):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def printable(name: str) -> str:
    """A name as the manifest may list it: undecodable bytes as \\xNN, control characters escaped, bounded."""
    raw = name.encode("utf-8", "surrogateescape")
    text = raw.decode("utf-8", "backslashreplace")
    text = "".join(c if unicodedata.category(c)[0] != "C" else c.encode("unicode_escape").decode() for c in text)
    return text[: protocol.MAX_OUTPUT_PATH_CHARS]


def declared_base(path: str) -> str:
    """The last part of a declared container path (`/out/logs/` → `logs`), the first part of its files' names.

    Raises BadName for a path that names the container's root (`/`, `/..`).
    """
    norm = posixpath.normpath("/" + path.lstrip("/"))
    base = posixpath.basename(norm)
    if not base:
        raise BadName(BAD_NAME, "the container's whole filesystem cannot be an output")
    return base


def relative_name(raw: str, base: str) -> str:
    """A tar member's name as the manifest's relative path (protocol.OutputFile.path), or BadName.

    `raw` comes from tarfile decoded as UTF-8 with surrogateescape: a surrogate is a byte that was not UTF-8.
    """
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise BadName(NOT_UTF8, "the name is not valid UTF-8") from None
    name = raw[:-1] if raw.endswith("/") else raw
    if not name or name.startswith("/"):
        raise BadName(BAD_NAME, "an absolute or empty name")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BadName(BAD_NAME, "a name with an empty, '.' or '..' part")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in name):
        raise BadName(BAD_NAME, "a name with a control character")
    if parts[0] != base:
        raise BadName(BAD_NAME, f"outside the declared path {base!r}")
    if len(name) > protocol.MAX_OUTPUT_PATH_CHARS:
        raise BadName(BAD_NAME, f"a name longer than {protocol.MAX_OUTPUT_PATH_CHARS} characters")
    return name


def member_kind(member: tarfile.TarInfo) -> str:
    """file | dir | symlink (hard links too: never followed) | device | special (FIFOs, anything else)."""
    if member.isreg():
        return "file"
    if member.isdir():
        return "dir"
    if member.issym():
        return SYMLINK
    if member.islnk():
        return "hardlink"
    if member.ischr() or member.isblk():
        return DEVICE
    return SPECIAL


SKIP_MESSAGES = {
    SYMLINK: "a symbolic link: not followed, not kept",
    "hardlink": "a hard link: not followed (the file it links to is kept under its first name)",
    DEVICE: "a device file: not kept",
    SPECIAL: "not a regular file (FIFO, socket or other): not kept",
}


@dataclass
class Tally:
    """What a collection kept and refused, and the caps it counts against.

    `job_cap`: the job's cap on all its outputs together; files are kept whole or not at all, so a file that does
    not fit is skipped and a smaller one after it may still be kept.
    """

    job_cap: int
    kept_bytes: int = 0
    files: list[protocol.OutputFile] = field(default_factory=list)
    skipped: list[protocol.OutputSkip] = field(default_factory=list)
    skipped_total: int = 0

    def skip(self, path: str, reason: str, message: str = "", *, listed: bool = False) -> None:
        """Count a skipped entry; list it while the list has room (`listed`: always, in the last place)."""
        self.skipped_total += 1
        entry = protocol.OutputSkip(path=printable(path), reason=reason, message=message[:500])
        if len(self.skipped) < protocol.MAX_OUTPUT_SKIPPED_LISTED:
            self.skipped.append(entry)
        elif listed:
            self.skipped[-1] = entry

    def refuse_file(self, size: int) -> tuple[str, str] | None:
        """(reason, message) when one more file of `size` bytes may not be kept; None when it may."""
        if len(self.files) >= protocol.MAX_OUTPUT_FILES:
            return TOO_MANY, f"more than {protocol.MAX_OUTPUT_FILES} files"
        if self.kept_bytes + size > self.job_cap:
            return JOB_CAP, f"{size} bytes do not fit in the job's output cap ({self.job_cap} bytes)"
        return None

    def keep(self, path: str, size: int, sha256: str) -> None:
        self.files.append(protocol.OutputFile(path=path, size=size, sha256=sha256))
        self.kept_bytes += size

    def manifest(self, error: str = "") -> protocol.OutputManifest:
        if error:
            return protocol.OutputManifest(skipped=self.skipped, skipped_total=self.skipped_total, error=error[:2000])
        return protocol.OutputManifest(files=self.files, skipped=self.skipped, skipped_total=self.skipped_total)


def outcome(manifest: protocol.OutputManifest, *, refused: int, failed: list[str]) -> tuple[str, str]:
    """The `ended` report's (outputs, outputs_message) from the manifest, the plan's refusals and failed uploads."""
    if manifest.error:
        return "failed", manifest.error[:2000]
    if failed:
        return "failed", ("upload failed: " + "; ".join(failed))[:2000]
    left_out = manifest.skipped_total + refused
    if left_out:
        reasons = sorted({s.reason for s in manifest.skipped})
        more = f" ({', '.join(reasons)})" if reasons else ""
        return "truncated", f"{len(manifest.files) - refused} files kept, {left_out} left out{more}"[:2000]
    return "complete", f"{len(manifest.files)} files"
