"""Walking a tree the job controls to count what it allocated on disk and its inodes (file system only, no Docker).

Symlinks are never followed, other file systems never entered, every directory opened relative to its parent's
descriptor; the walk stops as soon as a count passes its bound.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import NamedTuple

MAX_WALK_DEPTH = 128  # directory levels below a volume's root; one open fd per level while walking
MAX_SEEN_INODES = 100_000  # hard-linked inodes remembered per walk (counted once); past it, counted per link
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Unmeasurable(Exception):
    """A volume the guard cannot measure; the job is stopped rather than left unbounded."""


class _Over(Exception):
    """tree_usage: a count passed its bound; no need to walk on."""


class Usage(NamedTuple):
    bytes: int  # allocated (st_blocks × 512)
    inodes: int  # entries: files, directories, links, each inode once


def tree_bytes(root: str, *, max_depth: int = MAX_WALK_DEPTH, stop_above: int | None = None) -> int:
    """Bytes allocated under `root`: `tree_usage(...).bytes`."""
    return tree_usage(root, max_depth=max_depth, stop_bytes=stop_above).bytes


def tree_usage(
    root: str, *, max_depth: int = MAX_WALK_DEPTH, stop_bytes: int | None = None, stop_inodes: int | None = None
) -> Usage:
    """Bytes allocated on disk under `root` (st_blocks × 512; sparse files count what they use) and the entries
    below it, each inode once.

    Written for a tree the job controls: symlinks are never followed, other file systems are not entered,
    and every directory is opened relative to its parent's descriptor, so no path length hides anything.
    Entries that vanish mid-walk are skipped. With `stop_bytes` or `stop_inodes`, the walk ends as soon as a
    count passes it (the answer is then a lower bound, enough to know the limit is crossed). Raises Unmeasurable when
    `root` cannot be opened (the agent cannot see Docker's data root) or the tree is deeper than `max_depth`.
    """
    try:
        top = os.open(root, DIR_FLAGS)
    except OSError as exc:
        raise Unmeasurable(f"cannot open {root}: {exc.strerror}") from None
    top_stat = os.fstat(top)
    dev, total, inodes, seen = top_stat.st_dev, top_stat.st_blocks * 512, 0, set()

    def scan(fd: int) -> list[str]:
        nonlocal total, inodes
        subdirs = []
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    if st.st_ino in seen:
                        continue
                    if len(seen) < MAX_SEEN_INODES:
                        seen.add(st.st_ino)
                total += st.st_blocks * 512
                inodes += 1
                if (stop_bytes is not None and total > stop_bytes) or (
                    stop_inodes is not None and inodes > stop_inodes
                ):
                    raise _Over
                if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:
                    subdirs.append(entry.name)
        return subdirs

    stack = [(top, [])]
    try:
        stack[0] = (top, scan(top))
        while stack:
            fd, pending = stack[-1]
            if not pending:
                os.close(fd)
                stack.pop()
                continue
            name = pending.pop()
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    continue  # renamed, removed or swapped for a symlink since the scan
                raise
            if os.fstat(child).st_dev != dev:
                os.close(child)
                continue
            if len(stack) >= max_depth:
                os.close(child)
                raise Unmeasurable(f"its directories under {root} nest deeper than {max_depth} levels")
            stack.append((child, []))  # on the stack before the scan, so that the finally closes it
            stack[-1] = (child, scan(child))
    except _Over:
        pass
    except OSError as exc:  # e.g. a directory the job made unreadable, for an agent that is not root
        raise Unmeasurable(f"cannot read under {root}: {exc.strerror}") from None
    finally:
        for fd, _ in stack:
            os.close(fd)
    return Usage(total, inodes)
