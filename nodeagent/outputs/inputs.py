"""Place a job's inputs in its container before the command starts (created, not started: put_archive).

Each InputFile is downloaded straight into a one-file tar in the attempt's spool (header, bytes, padding), its
size and sha256 checked as it arrives, and streamed to the engine, which unpacks it inside the container's root.
A file that does not match what the control plane declared never reaches the container: the attempt ends
`start_failed` with the reason.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import tarfile
import time

from nodeagent import protocol
from nodeagent.backoff import Backoff
from nodeagent.client import Refused, Unreachable
from nodeagent.outputs.spool import AttemptSpool

DOWNLOAD_TRIES = 5
BLOCK = tarfile.BLOCKSIZE


class InputFailed(Exception):
    """An input could not be placed; the message says which and why (the attempt's `start_failed` message)."""


def _dir_member(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
    return info


def tar_head(to: str, size: int) -> bytes:
    """The headers of a tar that makes `to`'s parent directories and then the file (`size` bytes follow)."""
    parts = posixpath.normpath(to).strip("/").split("/")
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise InputFailed(f"{to}: not a usable path in the container")
    head = b"".join(
        _dir_member("/".join(parts[:i]) + "/").tobuf(format=tarfile.PAX_FORMAT) for i in range(1, len(parts))
    )
    info = tarfile.TarInfo("/".join(parts))
    info.size, info.mode, info.mtime = size, 0o644, int(time.time())
    return head + info.tobuf(format=tarfile.PAX_FORMAT)


def tar_tail(size: int) -> bytes:
    """The padding after `size` bytes of file data and the two zero blocks that end an archive."""
    return b"\0" * (-size % BLOCK) + b"\0" * (2 * BLOCK)


def place_inputs(client, api, container_id: str, inputs: list[protocol.InputFile], spool: AttemptSpool) -> None:
    """Download, verify and put each input into the (created, not started) container; InputFailed if one fails."""
    for item in inputs:
        name = _download(client, item, spool)
        try:
            with os.fdopen(spool.open_read(name), "rb") as fh:
                if not api.put_archive(container_id, "/", fh):
                    raise InputFailed(f"input {item.output_id} → {item.to}: the engine refused the archive")
        except InputFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - the engine's refusal, whatever its type, ends the start
            raise InputFailed(f"input {item.output_id} → {item.to}: the engine refused it: {exc}"[:2000]) from None
        finally:
            spool.discard(name)
            spool.unreserve(item.size)


def _download(client, item: protocol.InputFile, spool: AttemptSpool) -> str:
    """The input as a one-file tar in the spool, checked against its declared size and sha256."""
    what = f"input {item.output_id} → {item.to}"
    if not spool.reserve(item.size):
        raise InputFailed(f"{what}: {item.size} bytes do not fit in the node's spool (EULER_NODE_OUTPUT_SPOOL_BYTES)")
    backoff = Backoff(base=0.5, cap=10.0)
    problem = ""
    for _ in range(DOWNLOAD_TRIES):
        name, fd = spool.new_file()
        try:
            with os.fdopen(fd, "wb") as out:
                digest, got = hashlib.sha256(), 0
                out.write(tar_head(item.to, item.size))
                with client.download(item.url, authenticated=item.authenticated) as response:
                    for chunk in response.iter_bytes(1024 * 1024):
                        got += len(chunk)
                        if got > item.size:
                            raise InputFailed(f"{what}: more than the declared {item.size} bytes")
                        digest.update(chunk)
                        out.write(chunk)
                if got != item.size:
                    raise InputFailed(f"{what}: {got} bytes, not the declared {item.size}")
                if digest.hexdigest() != item.sha256:
                    raise InputFailed(f"{what}: sha256 {digest.hexdigest()} is not the declared {item.sha256}")
                out.write(tar_tail(item.size))
            return name
        except Unreachable as exc:
            spool.discard(name)
            problem = str(exc)
            time.sleep(backoff.next_delay())
        except Refused as exc:
            spool.discard(name)
            spool.unreserve(item.size)
            raise InputFailed(f"{what}: the download was refused: {exc}"[:2000]) from None
        except BaseException:
            spool.discard(name)
            spool.unreserve(item.size)
            raise
    spool.unreserve(item.size)
    raise InputFailed(f"{what}: the download failed {DOWNLOAD_TRIES} times: {problem}"[:2000])
