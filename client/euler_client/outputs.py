"""`client.outputs`: list a job's output files and download them, resumably, each checked against its sha256.

Downloads stream through httpx (never read whole into memory) into `NAME.part`, resume from its size with an
HTTP Range after a broken transfer, and become NAME only once the sha256 matches the server's listing."""

from __future__ import annotations

import os

from euler_client.answers import error_for
from euler_client.errors import EulerError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at start-up
if TYPE_CHECKING:
    from collections.abc import Callable

    from euler_client.api import Api

    Progress = Callable[[int, int], None]  # (bytes so far, total)

BLOCK = 1024 * 1024


class ChecksumMismatch(EulerError):
    """The downloaded bytes do not match the sha256 the server listed (the file is not kept)."""


class Outputs:
    def __init__(self, client: Api):
        self.c = client

    def list(self, job_id: int) -> dict:
        """GET /api/v1/jobs/{id}/outputs: `files` (path, size, sha256, created_at), `outputs_truncated`, `outputs_reason`."""
        return self.c.get(f"jobs/{int(job_id)}/outputs")

    def url(self, job_id: int, path: str) -> str:
        from urllib.parse import quote

        return f"jobs/{int(job_id)}/outputs/{quote(path)}"

    def download(self, job_id: int, file: dict, dest: str, *, progress: Progress | None = None) -> str:
        """Download one listed file (`file` as `list` gives it) to the path `dest`; returns `dest`."""
        import hashlib

        size, want = int(file["size"]), file["sha256"]
        part = dest + ".part"
        os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
        digest = hashlib.sha256()
        have = os.path.getsize(part) if os.path.exists(part) else 0
        if have > size:
            os.remove(part)
            have = 0
        if have:
            with open(part, "rb") as fh:
                for block in iter(lambda: fh.read(BLOCK), b""):
                    digest.update(block)
        if have < size:
            headers = {"Range": f"bytes={have}-"} if have else {}
            with self.c.reaching(), self.c.http.stream("GET", self.url(job_id, file["path"]), headers=headers) as r:
                if r.status_code >= 400:
                    r.read()
                    raise error_for(r)
                if have and r.status_code != 206:  # the server sent it all again: start over
                    have, digest = 0, hashlib.sha256()
                with open(part, "ab" if have else "wb") as out:
                    for block in r.iter_bytes(BLOCK):
                        out.write(block)
                        digest.update(block)
                        have += len(block)
                        if progress:
                            progress(have, size)
        elif progress:
            progress(have, size)
        if digest.hexdigest() != want:
            os.remove(part)
            raise ChecksumMismatch(f"{file['path']}: the downloaded bytes do not match its sha256 {want}",
                                   code="checksum_mismatch")  # fmt: skip
        os.replace(part, dest)
        return dest
