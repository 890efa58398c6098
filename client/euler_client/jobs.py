"""`client.jobs`: submit, read, cancel, retry, and follow a job through its log websocket (resumed after a drop)."""

from __future__ import annotations

import os
import sys
import time
from collections import namedtuple

from euler_client.answers import USER_AGENT, reason
from euler_client.errors import ConnectionFailed, EulerError
from euler_client.jsoncodec import loads
from euler_client.query import query as encode

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at start-up
if TYPE_CHECKING:
    from collections.abc import Iterator

    from euler_client.api import Api


# attempt (int | None), seq (int | None), stream ("stdout" | "stderr"; "output" for a whole, non-followed log),
# data (str). A namedtuple, not a dataclass: `dataclasses` imports `inspect`, a third of the CLI's start-up CPU.
LogChunk = namedtuple("LogChunk", "attempt seq stream data")


class Jobs:
    def __init__(self, client: Api):
        self.c = client

    def submit(self, body: dict | None = None, **fields) -> dict:
        """POST /api/v1/jobs with the API's fields (name, image, command, cpu_milli, memory_bytes, ...)."""
        return self.c.post("jobs", {**(body or {}), **fields})

    def get(self, job_id: int) -> dict:
        return self.c.get(f"jobs/{int(job_id)}")

    def list(self, *, state: str | None = None, limit: int | None = 50) -> list[dict]:
        return self.c.pages("jobs", limit=limit, state=state)

    def cancel(self, job_id: int) -> dict:
        return self.c.post(f"jobs/{int(job_id)}/cancel")

    def retry(self, job_id: int) -> dict:
        return self.c.post(f"jobs/{int(job_id)}/retry")

    def wait(self, job_id: int) -> dict:
        """Block until the job ends (told by the websocket, no polling); returns the ended job."""
        for message in self.events(job_id):
            if message.get("type") == "end":
                break
        return self.get(job_id)

    def moved(self, job_id: int, *, state: str | None = None, timeout: float = 20.0) -> dict:
        """One blocking read (GET /api/v1/jobs/{id}/wait): the job once its state is not `state` (without it: once
        it ended), or as it stands after `timeout` seconds (at most 60, and 5 s less than the client's own read
        timeout). Loop with the state it returns to follow a job through its moves at one read per move."""
        timeout = max(0.0, min(float(timeout), 60.0, self.c.timeout - 5.0))
        params = {"timeout": f"{timeout:g}"} | ({"state": state} if state else {})
        return self.c.get(f"jobs/{int(job_id)}/wait", **params)

    def logs(self, job_id: int, *, follow: bool = False, attempt: int | None = None) -> Iterator[LogChunk]:
        """The job's log. follow=True: chunks as they are stored, until the job ends, resuming after a
        dropped connection with no gap and no duplicate. follow=False: the stored log as one chunk."""
        if follow:
            for message in self.events(job_id):
                if message.get("type") == "log":
                    yield LogChunk(message.get("attempt"), message["seq"], message["stream"], message["data"])
            return
        params = {"attempt": attempt} if attempt is not None else {}
        response = self.c.request("GET", f"jobs/{int(job_id)}/logs", params=params)
        shown = response.headers.get("x-euler-attempt")
        if response.text:
            yield LogChunk(int(shown) if shown and shown.isdigit() else None, None, "output", response.text)

    def events(self, job_id: int, *, reconnect_for: float = 300.0) -> Iterator[dict]:
        """The websocket's messages (`log`, `attempt`, `state`, `end`), resumed across dropped connections."""
        for message in self.stream(job_id, reconnect_for=reconnect_for):
            if message is not None and message.get("type") != "connected":
                yield message

    def stream(self, job_id: int, *, tick: float | None = None, reconnect_for: float = 300.0) -> Iterator[dict | None]:
        """Like `events`, plus `{"type": "connected"}` after each (re)connect and, with `tick`, None after
        every `tick` seconds of silence (so a caller can do other work between messages)."""
        from euler_client.wire import Closed, HandshakeRefused, WebSocket

        job_id = int(job_id)
        last_seq: int | None = None
        attempt: int | None = None
        failing_since: float | None = None
        delay = 0.2
        while True:
            query = {"after_seq": last_seq, "attempt": attempt} if last_seq is not None else {}
            url = self.c.websocket_url(f"/ws/jobs/{job_id}/logs/") + (f"?{encode(query)}" if query else "")
            if os.environ.get("EULER_DEBUG"):
                sys.stderr.write(f"euler: debug: connecting to {url}\n")
            try:
                ws = WebSocket(url, {"X-Euler-API-Key": self.c.api_key, "User-Agent": USER_AGENT}, timeout=10)
            except HandshakeRefused as exc:
                status = exc.status
                if status >= 500 and _keep_trying(failing_since, reconnect_for):
                    failing_since = failing_since or time.monotonic()
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                self.get(job_id)  # a missing job or a bad key answers its own typed error here
                raise EulerError(
                    f"the log stream of job {job_id} was refused (HTTP {status})", code="ws_refused"
                ) from None
            except (OSError, Closed) as exc:
                failing_since = failing_since or time.monotonic()
                if not _keep_trying(failing_since, reconnect_for):
                    raise ConnectionFailed(
                        f"cannot reach {self.c.url} for the log stream: {reason(exc)}", code="unreachable"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            failing_since, delay = None, 0.2
            with ws:
                yield {"type": "connected"}
                while True:
                    try:
                        raw = ws.recv(timeout=tick)
                    except TimeoutError:
                        yield None
                        continue
                    except Closed:
                        break  # not ended: reconnect and resume after the last chunk
                    message = loads(raw)
                    if os.environ.get("EULER_DEBUG"):
                        sys.stderr.write(f"euler: debug: {message}\n")
                    kind = message.get("type")
                    if kind == "log":
                        last_seq, attempt = message["seq"], message.get("attempt", attempt)
                    elif kind == "attempt":
                        last_seq, attempt = -1, message.get("attempt")
                    yield message
                    if kind == "end":
                        return


def _keep_trying(failing_since: float | None, reconnect_for: float) -> bool:
    return failing_since is None or time.monotonic() - failing_since < reconnect_for
