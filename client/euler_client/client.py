"""The Python client: `Client(url, api_key)` or `Client.from_env()`, one method per API operation.

Errors are typed (`NotFound`, `Unauthorized`, `QuotaExceeded`, ...) and carry the server's `code`.
Job logs come from the websocket `/ws/jobs/{id}/logs/`; a dropped connection is resumed with
`after_seq`/`attempt`, so a follower sees every chunk once, in order, across a server restart.

`Client` talks HTTP through httpx (imported when the first request is made); `LightClient`, which the `euler`
command uses, through the standard library (`wire.py`), so that a command does not pay httpx's start-up.
"""

from __future__ import annotations

import sys

from euler_client.answers import USER_AGENT, error_for, reason
from euler_client.errors import ConnectionFailed
from euler_client.jsoncodec import dumps, loads
from euler_client.query import query

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at start-up
if TYPE_CHECKING:
    import contextlib

    import httpx

_ELSEWHERE = {"LogChunk": "euler_client.jobs", "sse_events": "euler_client.resources"}
__all__ = ["USER_AGENT", "Client", "LightClient", *_ELSEWHERE]


def __getattr__(name: str):
    """`LogChunk` and `sse_events`, kept importable from here, loaded with their modules on first use."""
    if name not in _ELSEWHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    __import__(_ELSEWHERE[name])  # not importlib: its package imports `warnings`
    return getattr(sys.modules[_ELSEWHERE[name]], name)


class _Namespace:
    """One of a client's resource namespaces (`client.jobs`, `client.nodes`, ...), made on first use: a command
    imports only the modules it touches (`euler run`: jobs.py alone; all of them cost ~1.5 ms of its start-up)."""

    def __init__(self, module: str, cls: str):
        self.module, self.cls = module, cls

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, client, owner=None):
        if client is None:
            return self
        __import__(self.module)  # not importlib: its package imports `warnings`
        value = getattr(sys.modules[self.module], self.cls)(client)
        client.__dict__[self.name] = value  # an attribute of the instance from now on: found before this
        return value


def _cheap_context():
    """A TLS context that loads no CA bundle, for plain-http servers (loading one costs start-up time)."""
    import ssl

    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class Client:
    jobs = _Namespace("euler_client.jobs", "Jobs")
    nodes = _Namespace("euler_client.resources", "Nodes")
    agents = _Namespace("euler_client.resources", "Agents")
    services = _Namespace("euler_client.resources", "Services")
    keys = _Namespace("euler_client.resources", "Keys")
    arrays = _Namespace("euler_client.resources", "Arrays")
    outputs = _Namespace("euler_client.outputs", "Outputs")
    checkpoints = _Namespace("euler_client.checkpoints", "Checkpoints")
    schedules = _Namespace("euler_client.workflows", "Schedules")
    webhooks = _Namespace("euler_client.workflows", "Webhooks")

    def __init__(self, url: str, api_key: str, *, timeout: float = 30.0, transport: httpx.BaseTransport | None = None):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self._transport = transport
        self._http: httpx.Client | None = None

    @property
    def http(self) -> httpx.Client:
        """The httpx client, made (and httpx imported) on first use."""
        if self._http is None:
            import httpx

            verify: object = True if self.url.startswith("https://") else _cheap_context()
            self._http = httpx.Client(
                base_url=self.url + "/api/v1/",
                headers={"X-Euler-API-Key": self.api_key, "User-Agent": USER_AGENT},
                timeout=self.timeout,
                verify=verify,
                transport=self._transport,
            )
        return self._http

    @classmethod
    def from_env(cls, *, profile: str | None = None, **kwargs) -> Client:
        """EULER_URL / EULER_API_KEY, else the profile stored by `euler login`."""
        from euler_client.config import resolve

        settings = resolve(profile=profile)
        return cls(settings.url, settings.api_key, **kwargs)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- HTTP ------------------------------------------------------------------------------------
    def reaching(self) -> contextlib.AbstractContextManager[None]:
        """A server that does not answer becomes ConnectionFailed (`timeout` or `unreachable`)."""
        return _Reaching(self.url)

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        """One API call; an error answer raises its typed error, a server that does not answer ConnectionFailed."""
        with self.reaching():
            response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise error_for(response)
        return response

    def get(self, path: str, **params) -> object:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def post(self, path: str, body: dict | None = None) -> object:
        response = self.request("POST", path, json=body if body is not None else {})
        return response.json() if response.content else None

    def patch(self, path: str, body: dict) -> object:
        return self.request("PATCH", path, json=body).json()

    def put(self, path: str, body: dict) -> object:
        return self.request("PUT", path, json=body).json()

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


class _Reaching:
    """`Client.reaching()`: httpx's timeouts and transport errors become ConnectionFailed (a class, not
    contextlib's decorator: `contextlib` is not imported at the CLI's start-up)."""

    def __init__(self, url: str):
        self.url = url

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        httpx = sys.modules.get("httpx")
        if kind is None or httpx is None:  # not loaded: the error is not one of its own
            return False
        if issubclass(kind, httpx.TimeoutException):
            raise ConnectionFailed(f"{self.url} did not answer in time", code="timeout") from None
        if issubclass(kind, httpx.TransportError):
            raise ConnectionFailed(f"cannot reach {self.url}: {reason(exc)}", code="unreachable") from None
        return False


class _Answer:
    """The little of httpx.Response that the client reads, for answers read by `wire`."""

    def __init__(self, status: int, headers: dict[str, str], content: bytes):
        self.status_code, self.headers, self.content = status, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> object:
        return loads(self.content)


class LightClient(Client):
    """A Client whose API calls go through the standard library (`wire`), not httpx: what the `euler` command
    uses, since importing httpx costs more CPU than a whole `euler run`. The streamed gateway call
    (`agents.invoke`) still uses httpx. Not for a machine that must go through an HTTP proxy (no proxy support:
    `from_env` and the CLI pick `Client` when HTTP(S)_PROXY is set)."""

    def __init__(self, url: str, api_key: str, *, timeout: float = 30.0):
        super().__init__(url, api_key, timeout=timeout)
        from euler_client.wire import Connection

        self._wire = Connection(self.url, {"X-Euler-API-Key": api_key, "User-Agent": USER_AGENT}, timeout=timeout)
        self._prefix = "/" + self.url.split("://", 1)[-1].partition("/")[2].strip("/")
        self._prefix = self._prefix.rstrip("/") + "/api/v1/"

    def request(self, method: str, path: str, *, params: dict | None = None, json: object = None) -> _Answer:
        target = self._prefix + path + (f"?{query(params)}" if params else "")
        body = dumps(json).encode() if json is not None else None
        try:
            answer = _Answer(*self._wire.request(method, target, body))
        except TimeoutError:
            raise ConnectionFailed(f"{self.url} did not answer in time", code="timeout") from None
        except OSError as exc:
            raise ConnectionFailed(f"cannot reach {self.url}: {reason(exc)}", code="unreachable") from None
        if answer.status_code >= 400:
            raise error_for(answer)
        return answer

    def close(self) -> None:
        self._wire.close()
        super().close()


def proxied() -> bool:
    """Whether this environment routes HTTP through a proxy (which only httpx honours)."""
    import os

    return any(
        os.environ.get(name)
        for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
    )
