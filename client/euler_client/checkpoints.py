"""`client.checkpoints`: list a job's committed checkpoints and fetch one (the latest by default) into a directory.

The server streams the checkpoint as a tar; it is read as it arrives (never whole in memory) and only its regular
files are written, each under the target directory (a name that would land outside it is refused)."""

from __future__ import annotations

import os

from euler_client.answers import error_for
from euler_client.errors import EulerError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from euler_client.api import Api

BLOCK = 1024 * 1024


class UnsafeName(EulerError):
    """A member of the archive would land outside the target directory (it is not written)."""


def _target(directory: str, name: str) -> str:
    root = os.path.abspath(directory)
    dest = os.path.abspath(os.path.join(root, *name.split("/")))
    if os.path.commonpath([dest, root]) != root or dest == root:
        raise UnsafeName(f"refusing {name!r}: it would land outside {directory}", code="unsafe_name")
    return dest


class _Reader:
    """A file-like view of an httpx response's byte stream, for tarfile's stream mode."""

    def __init__(self, response):
        self.blocks = response.iter_bytes(BLOCK)
        self.buf = b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self.buf) < n:
            block = next(self.blocks, None)
            if block is None:
                break
            self.buf += block
        if n < 0:
            out, self.buf = self.buf, b""
        else:
            out, self.buf = self.buf[:n], self.buf[n:]
        return out


class Checkpoints:
    def __init__(self, client: Api):
        self.c = client

    def list(self, job_id: int) -> dict:
        """GET /api/v1/jobs/{id}/checkpoints: `declared`, `last_refusal`, `checkpoints` (seq, attempt, reason,
        created_at, size, files), newest first."""
        return self.c.get(f"jobs/{int(job_id)}/checkpoints")

    def download(self, job_id: int, directory: str, *, which: str = "latest") -> list[dict]:
        """The checkpoint's files into `directory` (made if missing); [{"path", "file", "size"}] in archive order."""
        import tarfile

        os.makedirs(directory, exist_ok=True)
        written = []
        url = f"jobs/{int(job_id)}/checkpoints/{which}/download"
        with self.c.reaching(), self.c.http.stream("GET", url) as r:
            if r.status_code >= 400:
                r.read()
                raise error_for(r)
            with tarfile.open(fileobj=_Reader(r), mode="r|") as tar:
                for member in tar:
                    if not member.isfile():
                        continue
                    dest = _target(directory, member.name)
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    source = tar.extractfile(member)
                    with open(dest + ".part", "wb") as out:
                        while block := source.read(BLOCK):
                            out.write(block)
                    os.replace(dest + ".part", dest)
                    written.append({"path": member.name, "file": dest, "size": member.size})
        return written
