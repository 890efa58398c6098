"""The Python client: `Client(url, api_key)` or `Client.from_env()`, one method per API operation.

Errors are typed (`NotFound`, `Unauthorized`, `QuotaExceeded`, ...) and carry the server's `code`.
Job logs come from the websocket `/ws/jobs/{id}/logs/`; a dropped connection is resumed with
`after_seq`/`attempt`, so a follower sees every chunk once, in order, across a server restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote, urlencode

import httpx

from euler_client import __version__
from euler_client.errors import ConnectionFailed, EulerError, error_from_answer

USER_AGENT = f"euler-client/{__version__}"


@dataclass(frozen=True)
class LogChunk:
    attempt: int | None
    seq: int | None
    stream: str  # "stdout" | "stderr" ("output" for a whole, non-followed log)
    data: str


def _cheap_context():
    """A TLS context that loads no CA bundle, for plain-http servers (loading one costs start-up time)."""
    import ssl

    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class Client:
    def __init__(self, url: str, api_key: str, *, timeout: float = 30.0, transport: httpx.BaseTransport | None = None):
        self.url = url.rstrip("/")
        self.api_key = api_key
        verify: object = True if self.url.startswith("https://") else _cheap_context()
        self._http = httpx.Client(
            base_url=self.url + "/api/v1/",
            headers={"X-Euler-API-Key": api_key, "User-Agent": USER_AGENT},
            timeout=timeout,
            verify=verify,
            transport=transport,
        )
        self.jobs = Jobs(self)
        self.nodes = Nodes(self)
        self.agents = Agents(self)
        self.keys = Keys(self)

    @classmethod
    def from_env(cls, *, profile: str | None = None, **kwargs) -> Client:
        """EULER_URL / EULER_API_KEY, else the profile stored by `euler login`."""
        from euler_client.config import resolve

        settings = resolve(profile=profile)
        return cls(settings.url, settings.api_key, **kwargs)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- HTTP ------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def reaching(self):
        """A server that does not answer becomes ConnectionFailed (`timeout` or `unreachable`)."""
        try:
            yield
        except httpx.TimeoutException:
            raise ConnectionFailed(f"{self.url} did not answer in time", code="timeout") from None
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach {self.url}: {_reason(exc)}", code="unreachable") from None

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        """One API call; an error answer raises its typed error, a server that does not answer ConnectionFailed."""
        with self.reaching():
            response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise _error(response)
        return response

    def get(self, path: str, **params) -> object:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def post(self, path: str, body: dict | None = None) -> object:
        response = self.request("POST", path, json=body if body is not None else {})
        return response.json() if response.content else None

    def patch(self, path: str, body: dict) -> object:
        return self.request("PATCH", path, json=body).json()

    def delete(self, path: str) -> None:
        self.request("DELETE", path)

    def pages(self, path: str, *, limit: int | None = None, **params) -> list[dict]:
        """The items of a paginated list, newest first as the server orders them, at most `limit`."""
        size = min(limit or 500, 500)
        items: list[dict] = []
        page = 1
        while True:
            data = self.get(path, page=page, page_size=size, **params)
            items.extend(data.get("results", []))
            if not data.get("next") or (limit is not None and len(items) >= limit):
                return items[:limit] if limit is not None else items
            page += 1

    # --- project ---------------------------------------------------------------------------------
    def project(self) -> dict:
        """The caller's project: name, quota, usage so far in the current period."""
        return self.get("project")

    def usage(self, *, start: str | None = None, end: str | None = None, group_by: str | None = None) -> dict:
        """Without arguments: the project summary (quota and usage this period); with dates: the usage ledger."""
        if start is None and end is None and group_by is None:
            return self.project()
        return self.get("usage", **{"from": start, "to": end, "group_by": group_by})

    def websocket_url(self, path: str) -> str:
        return ("wss://" if self.url.startswith("https://") else "ws://") + self.url.split("://", 1)[1] + path


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if "Connection refused" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host"
    return " ".join(text.split())


def _error(response: httpx.Response) -> EulerError:
    try:
        body = response.json()
    except ValueError:
        body = response.text.strip()[:200] if "text/" in response.headers.get("content-type", "") else ""
    return error_from_answer(response.status_code, body, dict(response.headers))


class Jobs:
    def __init__(self, client: Client):
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
        from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
        from websockets.sync.client import connect

        job_id = int(job_id)
        last_seq: int | None = None
        attempt: int | None = None
        failing_since: float | None = None
        delay = 0.2
        while True:
            query = {"after_seq": last_seq, "attempt": attempt} if last_seq is not None else {}
            url = self.c.websocket_url(f"/ws/jobs/{job_id}/logs/") + (f"?{urlencode(query)}" if query else "")
            if os.environ.get("EULER_DEBUG"):
                sys.stderr.write(f"euler: debug: connecting to {url}\n")
            try:
                ws = connect(
                    url,
                    additional_headers={"X-Euler-API-Key": self.c.api_key},
                    user_agent_header=USER_AGENT,
                    open_timeout=10,
                    max_size=None,
                    compression=None,
                )
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status >= 500 and _keep_trying(failing_since, reconnect_for):
                    failing_since = failing_since or time.monotonic()
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                self.get(job_id)  # a missing job or a bad key answers its own typed error here
                raise EulerError(
                    f"the log stream of job {job_id} was refused (HTTP {status})", code="ws_refused"
                ) from None
            except (OSError, TimeoutError, WebSocketException) as exc:
                failing_since = failing_since or time.monotonic()
                if not _keep_trying(failing_since, reconnect_for):
                    raise ConnectionFailed(
                        f"cannot reach {self.c.url} for the log stream: {_reason(exc)}", code="unreachable"
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
                    except ConnectionClosed:
                        break  # not ended: reconnect and resume after the last chunk
                    message = json.loads(raw)
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


class Nodes:
    def __init__(self, client: Client):
        self.c = client

    def list(self) -> dict:
        """{"own": [...the project's nodes...], "public_pool": {...summary...}}."""
        return self.c.get("nodes")

    def get(self, node_id: int) -> dict:
        return self.c.get(f"nodes/{int(node_id)}")

    def create_token(self, **fields) -> dict:
        """A one-time enrollment token (`token` is shown once): trust, region, labels, label, ttl."""
        return self.c.post("nodes/enrollment-tokens", {k: v for k, v in fields.items() if v is not None})

    def tokens(self) -> list[dict]:
        return self.c.pages("nodes/enrollment-tokens")

    def revoke_token(self, token_id: int) -> None:
        self.c.delete(f"nodes/enrollment-tokens/{int(token_id)}")


class Agents:
    def __init__(self, client: Client):
        self.c = client

    def list(self) -> list[dict]:
        return self.c.pages("agents")

    def get(self, name: str) -> dict:
        return self.c.get(f"agents/{quote(name, safe='')}")

    def create(self, body: dict | None = None, **fields) -> dict:
        return self.c.post("agents", {**(body or {}), **fields})

    def update(self, name: str, **fields) -> dict:
        return self.c.patch(f"agents/{quote(name, safe='')}", fields)

    def delete(self, name: str) -> None:
        self.c.delete(f"agents/{quote(name, safe='')}")

    def stats(self, name: str, window: str = "1h") -> dict:
        return self.c.get(f"agents/{quote(name, safe='')}/stats", window=window)

    def invoke(self, name: str, path: str = "", *, method: str = "POST", json_body: object = None,
               content: bytes | str | None = None, headers: dict | None = None, timeout: float | None = None):  # fmt: skip
        """Call the agent through the gateway; a context manager over the streamed httpx response.

        with client.agents.invoke("chat", "v1/chat", json_body={...}) as r:
            for event in sse_events(r): ...
        """
        url = f"agents/{quote(name, safe='')}/invoke/{path.lstrip('/')}"
        kwargs: dict = {"headers": headers or {}}
        if json_body is not None:
            kwargs["json"] = json_body
        elif content is not None:
            kwargs["content"] = content
        return _Invocation(self.c, method, url, kwargs, timeout)


class _Invocation:
    def __init__(self, client: Client, method: str, url: str, kwargs: dict, timeout: float | None):
        self.client, self.method, self.url, self.kwargs = client, method, url, kwargs
        self.timeout = timeout
        self._cm = None

    def __enter__(self) -> httpx.Response:
        timeout = httpx.Timeout(self.client._http.timeout.connect, read=self.timeout) if self.timeout else None
        extra = {"timeout": timeout} if timeout else {"timeout": httpx.Timeout(30.0, read=None)}
        self._cm = self.client._http.stream(self.method, self.url, **self.kwargs, **extra)
        with self.client.reaching():
            response = self._cm.__enter__()
        if response.status_code >= 400 and _is_euler_error(response):
            response.read()
            self._cm.__exit__(None, None, None)
            raise _error(response)
        return response

    def __exit__(self, *exc) -> None:
        if self._cm is not None:
            self._cm.__exit__(*exc)


def _is_euler_error(response: httpx.Response) -> bool:
    """The gateway's own refusals carry `code`; an agent's own error answer is relayed as it is."""
    return response.headers.get("content-type", "").startswith("application/json") and response.status_code in (
        401, 403, 404, 429, 502, 503, 504,
    )  # fmt: skip


def sse_events(response: httpx.Response) -> Iterator[dict]:
    """Server-sent events of a streamed response, one dict per event: {"event", "data", "id"}."""
    event: dict = {}
    data: list[str] = []
    for line in response.iter_lines():
        if not line:
            if data or event:
                yield {"event": event.get("event", "message"), "data": "\n".join(data), "id": event.get("id")}
            event, data = {}, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field in ("event", "id"):
            event[field] = value
    if data:
        yield {"event": event.get("event", "message"), "data": "\n".join(data), "id": event.get("id")}


class Keys:
    def __init__(self, client: Client):
        self.c = client

    def list(self) -> list[dict]:
        return self.c.pages("api-keys")

    def create(self, label: str = "") -> dict:
        """A new key; its secret (`key`) is in this answer only."""
        return self.c.post("api-keys", {"label": label})

    def revoke(self, key_id: int) -> None:
        self.c.delete(f"api-keys/{int(key_id)}")
