"""The agent's output spool: one 0700 directory per attempt under the state dir, flat numbered files inside.

Files are named by number (`f000001`), never by the job's names, so nothing a job chooses becomes a path on the
host; each is created with O_EXCL|O_NOFOLLOW relative to its directory's descriptor. The spool is the agent's
own: no container ever mounts it. A lender's cap bounds what all attempts spool together (SpoolBudget).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import threading
from pathlib import Path

DEFAULT_SPOOL_BYTES = 8 * 1024**3
_ATTEMPT_DIR = re.compile(r"^[0-9]{1,20}$")


class SpoolError(OSError):
    """The spool directory is not what the agent made (a link, someone else's, the wrong kind)."""


class SpoolBudget:
    """Bytes the whole spool may hold (EULER_NODE_OUTPUT_SPOOL_BYTES), shared by every attempt on the node."""

    def __init__(self, cap: int):
        self.cap = cap
        self.used = 0
        self._lock = threading.Lock()

    def reserve(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.cap:
                return False
            self.used += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self.used = max(0, self.used - size)


def _private_dir(path: Path, *, create: bool) -> None:
    """`path` as a real directory of ours, mode 0700; never through a link."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise SpoolError(f"{path} is not a directory of this agent's")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)


class OutputSpool:
    """The spool's root (`<state dir>/outputs`) and its budget."""

    def __init__(self, root: Path, cap: int = DEFAULT_SPOOL_BYTES):
        self.root = Path(root)
        self.budget = SpoolBudget(cap)
        _private_dir(self.root, create=True)

    def attempt(self, attempt_id: int, *, part: str = "") -> AttemptSpool:
        """The attempt's spool; `part` names another of its own (a checkpoint's, beside the outputs')."""
        return AttemptSpool(self, int(attempt_id), part=part)

    def clear(self, *, keep: set[int] = frozenset()) -> None:
        """Remove the spools of attempts this agent no longer holds (at start: a restart collects anew)."""
        for entry in os.scandir(self.root):
            if _ATTEMPT_DIR.match(entry.name) and int(entry.name) in keep:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


class AttemptSpool:
    """One attempt's directory: new files only, each counted against the budget until the spool is removed."""

    def __init__(self, spool: OutputSpool, attempt_id: int, *, part: str = ""):
        self.spool = spool
        self.path = spool.root / (f"{attempt_id}-{part}" if part else str(attempt_id))
        self.reserved = 0
        self._next = 0
        self._fd: int | None = None

    def open(self) -> AttemptSpool:
        """Start afresh: whatever a previous agent left for this attempt is removed first."""
        self.remove()
        _private_dir(self.path, create=True)
        self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        return self

    def new_file(self) -> tuple[str, int]:
        """(its spool name, a write descriptor) for a new file, created here and nowhere else."""
        if self._fd is None:
            self.open()
        self._next += 1
        name = f"f{self._next:06d}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        return name, os.open(name, flags, 0o600, dir_fd=self._fd)

    def open_read(self, name: str) -> int:
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=self._fd)

    def discard(self, name: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=self._fd)

    def reserve(self, size: int) -> bool:
        if not self.spool.budget.reserve(size):
            return False
        self.reserved += size
        return True

    def unreserve(self, size: int) -> None:
        size = min(size, self.reserved)
        self.reserved -= size
        self.spool.budget.release(size)

    def remove(self) -> None:
        """Delete the attempt's files and give their bytes back to the budget."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        shutil.rmtree(self.path, ignore_errors=True)
        self.unreserve(self.reserved)
