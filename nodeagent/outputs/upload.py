"""Upload a collection to the control plane: POST the manifest, then follow its plan file by file.

"chunks": PUT at most protocol.MAX_OUTPUT_CHUNK_BYTES at a time with `Content-Range`, from the offset the server
holds; after a failure or a 409 the agent GETs that offset and resumes from it. "put": one streamed PUT of the
whole file to a presigned URL with exactly the plan's headers, then POST `done`. A file is read from the spool as
it is sent, never held whole in memory. Unanswered requests are retried with backoff until no progress was made
for `give_up_seconds`.
"""

from __future__ import annotations

import os
import threading
import time

from nodeagent import protocol
from nodeagent.backoff import Backoff
from nodeagent.client import Refused, Unreachable
from nodeagent.logship import Stale
from nodeagent.outputs import rules
from nodeagent.outputs.collect import Collected
from nodeagent.outputs.spool import AttemptSpool

GIVE_UP_SECONDS = 600.0


class Interrupted(Exception):
    """The agent is closing: the upload stops; a restarted agent collects and uploads anew (the server resumes)."""


class FileFailed(Exception):
    """One file could not be uploaded; the others go on."""


class Uploader:
    def __init__(
        self,
        client,
        attempt_id: int,
        spool: AttemptSpool,
        *,
        closing: threading.Event,
        give_up_seconds: float = GIVE_UP_SECONDS,
        backoff: Backoff | None = None,
    ):
        self.client = client
        self.attempt_id = attempt_id
        self.spool = spool
        self.closing = closing
        self.give_up_seconds = give_up_seconds
        self.backoff = backoff or Backoff(base=0.2, cap=15.0)

    def run(self, collected: Collected) -> tuple[str, str]:
        """Send everything; the `ended` report's (outputs, outputs_message)."""
        manifest = collected.manifest
        path = protocol.PATH_ATTEMPT_OUTPUTS.format(attempt_id=self.attempt_id)
        try:
            answer = self._retry(lambda: self.client.call("POST", path, manifest.model_dump()))
            plan = protocol.OutputsPlan.model_validate(answer)
        except FileFailed as exc:
            return "failed", f"the control plane did not take the manifest: {exc}"[:2000]
        except ValueError as exc:
            return "failed", f"the control plane's plan was not understood: {exc}"[:2000]
        sizes = {f.path: f.size for f in manifest.files}
        failed = []
        for upload in plan.uploads:
            name = collected.spool_names.get(upload.path)
            try:
                if name is None or upload.path not in sizes:
                    raise FileFailed("the plan names a file the manifest did not list")
                if upload.method == "put":
                    self._put(upload, name, sizes[upload.path])
                else:
                    self._chunks(upload, name, sizes[upload.path])
            except FileFailed as exc:
                failed.append(f"{rules.printable(upload.path)[:200]}: {exc}")
        return rules.outcome(manifest, refused=len(plan.refused), failed=failed)

    # --- one file --------------------------------------------------------------------------------
    def _file_path(self, upload) -> str:
        """Where a file's chunks go (and its offset is read); checkpoints send blobs elsewhere."""
        return protocol.PATH_ATTEMPT_OUTPUT_FILE.format(attempt_id=self.attempt_id, file_id=upload.file_id)

    def _done_path(self, upload) -> str:
        return protocol.PATH_ATTEMPT_OUTPUT_DONE.format(attempt_id=self.attempt_id, file_id=upload.file_id)

    def _chunks(self, upload: protocol.OutputUpload, name: str, size: int) -> None:
        path = self._file_path(upload)
        offset = upload.offset
        with os.fdopen(self.spool.open_read(name), "rb") as fh:
            progress = time.monotonic()
            while True:
                if offset >= size and size > 0:
                    reply = self._held(path)  # everything sent: the server says whether it verified it
                    if reply.complete:
                        return
                    if reply.offset >= size:
                        raise FileFailed("the server holds every byte but did not verify the file")
                    offset = reply.offset
                    continue
                n = min(protocol.MAX_OUTPUT_CHUNK_BYTES, size - offset)
                fh.seek(offset)
                data = fh.read(n)
                span = f"bytes {offset}-{offset + n - 1}/{size}" if size else "bytes */0"
                headers = {"Content-Range": span, "Content-Type": "application/octet-stream"}
                try:
                    answer = self.client.send("PUT", path, content=data, headers=headers)
                    reply = protocol.OutputFileReply.model_validate(answer)
                except (Unreachable, Refused) as exc:
                    self._judge(exc, progress)
                    offset = self._held(path).offset  # resume from what the server holds
                    continue
                except ValueError as exc:
                    raise FileFailed(f"a chunk reply was not understood: {exc}") from None
                if reply.offset > offset:
                    progress = time.monotonic()
                    self.backoff.reset()
                if reply.complete:
                    return
                if size == 0:
                    raise FileFailed("the server did not verify the empty file")
                offset = reply.offset

    def _put(self, upload: protocol.OutputUpload, name: str, size: int) -> None:
        done = self._done_path(upload)
        progress = time.monotonic()
        while True:
            with os.fdopen(self.spool.open_read(name), "rb") as fh:
                try:
                    # A file object: httpx streams it and sends its Content-Length (object stores refuse chunked).
                    self.client.send("PUT", upload.url, content=fh, headers=dict(upload.headers), authenticated=False)
                    break
                except (Unreachable, Refused) as exc:
                    self._judge(exc, progress)
        answer = self._retry(lambda: self.client.call("POST", done, {}))
        try:
            reply = protocol.OutputFileReply.model_validate(answer)
        except ValueError as exc:
            raise FileFailed(f"the done reply was not understood: {exc}") from None
        if not reply.complete:
            raise FileFailed(f"the server did not verify the file ({reply.offset} of {size} bytes stored)")

    def _held(self, path: str) -> protocol.OutputFileReply:
        answer = self._retry(lambda: self.client.call("GET", path))
        try:
            return protocol.OutputFileReply.model_validate(answer)
        except ValueError as exc:
            raise FileFailed(f"the offset reply was not understood: {exc}") from None

    # --- retries ---------------------------------------------------------------------------------
    def _retry(self, fn):
        """fn() until it answers; Refused (other than a resumable 409) fails the file."""
        since = time.monotonic()
        while True:
            try:
                answer = fn()
                self.backoff.reset()
                return answer
            except (Unreachable, Refused) as exc:
                self._judge(exc, since, resumable=False)

    def _judge(self, exc: Exception, since: float, *, resumable: bool = True) -> None:
        """After a failed request: return to try again (after a backoff), or raise what ends the file or the run."""
        if isinstance(exc, Refused):
            if exc.status == 409 and exc.code in ("stale_attempt", "stale"):
                raise Stale(exc.code)
            if not (resumable and exc.status == 409):
                raise FileFailed(f"{exc.status} {exc.code}: {exc.body.get('detail', '')}"[:300])
        if self.closing.is_set():
            raise Interrupted
        if time.monotonic() - since > self.give_up_seconds:
            raise FileFailed(f"no progress for {self.give_up_seconds:.0f} s: {exc}"[:300])
        if self.closing.wait(self.backoff.next_delay()):
            raise Interrupted
