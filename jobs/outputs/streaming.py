"""Streamed bodies of downloads: one file (or a byte range of it) and the whole set as a tar archive.

Under ASGI Django serves a sync iterator by reading it whole into memory first, so the web process gets an
async iterator that pulls one block at a time from a thread; the memory a download holds is one block
(store.BLOCK), whatever the file's size. Under WSGI (the test client) the sync iterator is served as it is."""

from __future__ import annotations

import tarfile
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest

from jobs.outputs import store


async def _pull(blocks: Iterator[bytes]) -> AsyncIterator[bytes]:
    step = sync_to_async(lambda: next(blocks, None), thread_sensitive=False)
    try:
        while (block := await step()) is not None:
            yield block
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=False)()


def body(request, blocks: Iterator[bytes]) -> Iterable[bytes] | AsyncIterator[bytes]:
    """The response content for `blocks`: pulled block by block under ASGI."""
    django_request = getattr(request, "_request", request)
    return _pull(blocks) if isinstance(django_request, ASGIRequest) else blocks


@dataclass(frozen=True)
class Member:
    path: str
    size: int
    key: str
    mtime: float


def _header(m: Member) -> bytes:
    info = tarfile.TarInfo(name=m.path)
    info.size, info.mtime, info.mode, info.type = m.size, int(m.mtime), 0o644, tarfile.REGTYPE
    return info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="strict")


def tar_size(members: list[Member]) -> int:
    return sum(len(_header(m)) + m.size + (-m.size) % tarfile.BLOCKSIZE for m in members) + 2 * tarfile.BLOCKSIZE


def tar_blocks(members: list[Member]) -> Iterator[bytes]:
    """A POSIX (pax) tar of the files, written as it is read: headers, each file's bytes, padding, the end."""
    for m in members:
        yield _header(m)
        if m.size:
            yield from store.iter_range(m.key, 0, None)
        pad = (-m.size) % tarfile.BLOCKSIZE
        if pad:
            yield b"\0" * pad
    yield b"\0" * (2 * tarfile.BLOCKSIZE)
