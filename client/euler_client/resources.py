"""`client.nodes`, `client.agents` (with the streamed gateway call and its server-sent events), `client.services`
and `client.keys`."""

from __future__ import annotations

from collections.abc import Iterator

from euler_client.answers import error_for

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at start-up
if TYPE_CHECKING:
    import httpx

    from euler_client.api import Api


class Nodes:
    def __init__(self, client: Api):
        self.c = client

    def list(self) -> dict:
        """{"own": [...the project's nodes...], "public_pool": {...summary...}}."""
        return self.c.get("nodes")

    def get(self, node_id: int) -> dict:
        return self.c.get(f"nodes/{int(node_id)}")

    def create_token(self, **fields) -> dict:
        """A one-time enrollment token (`token` is shown once): trust, region, labels, label, ttl."""
        return self.c.post("nodes/enrollment-tokens", {k: v for k, v in fields.items() if v is not None})

    def mine(self) -> list[dict]:
        """The machines the caller lent: state, what runs there, hours per day, losses, terms, reliability."""
        return self.c.get("lending")["machines"]

    def terms(self, name: str) -> dict | None:
        return self.c.get(f"lending/{_quoted(name)}/terms")["terms"]

    def set_terms(self, name: str, terms: dict) -> dict | None:
        """Replace a lent machine's terms whole ({} clears them)."""
        return self.c.put(f"lending/{_quoted(name)}/terms", terms)["terms"]

    def ledger(self, *, group_by: str = "lender", month: str | None = None, period: str | None = None) -> dict:
        return self.c.get("ledger", group_by=group_by, month=month, period=period)

    def tokens(self) -> list[dict]:
        return self.c.pages("nodes/enrollment-tokens")

    def revoke_token(self, token_id: int) -> None:
        self.c.delete(f"nodes/enrollment-tokens/{int(token_id)}")


class Agents:
    def __init__(self, client: Api):
        self.c = client

    def list(self) -> list[dict]:
        return self.c.pages("agents")

    def get(self, name: str) -> dict:
        return self.c.get(f"agents/{_quoted(name)}")

    def create(self, body: dict | None = None, **fields) -> dict:
        return self.c.post("agents", {**(body or {}), **fields})

    def update(self, name: str, **fields) -> dict:
        return self.c.patch(f"agents/{_quoted(name)}", fields)

    def delete(self, name: str) -> None:
        self.c.delete(f"agents/{_quoted(name)}")

    def stats(self, name: str, window: str = "1h") -> dict:
        return self.c.get(f"agents/{_quoted(name)}/stats", window=window)

    def invoke(self, name: str, path: str = "", *, method: str = "POST", json_body: object = None,
               content: bytes | str | None = None, headers: dict | None = None, timeout: float | None = None):  # fmt: skip
        """Call the agent through the gateway; a context manager over the streamed httpx response.

        with client.agents.invoke("chat", "v1/chat", json_body={...}) as r:
            for event in sse_events(r): ...
        """
        url = f"agents/{_quoted(name)}/invoke/{path.lstrip('/')}"
        kwargs: dict = {"headers": headers or {}}
        if json_body is not None:
            kwargs["json"] = json_body
        elif content is not None:
            kwargs["content"] = content
        return _Invocation(self.c, method, url, kwargs, timeout)


class _Invocation:
    def __init__(self, client: Api, method: str, url: str, kwargs: dict, timeout: float | None):
        self.client, self.method, self.url, self.kwargs = client, method, url, kwargs
        self.timeout = timeout
        self._cm = None

    def __enter__(self) -> httpx.Response:
        import httpx

        http = self.client.http
        timeout = httpx.Timeout(http.timeout.connect, read=self.timeout) if self.timeout else None
        extra = {"timeout": timeout} if timeout else {"timeout": httpx.Timeout(30.0, read=None)}
        self._cm = http.stream(self.method, self.url, **self.kwargs, **extra)
        with self.client.reaching():
            response = self._cm.__enter__()
        if response.status_code >= 400 and _is_euler_error(response):
            response.read()
            self._cm.__exit__(None, None, None)
            raise error_for(response)
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


class Services:
    """Long-running services on the pool, fronted by the gateway as the agent of the same name."""

    def __init__(self, client: Api):
        self.c = client

    def list(self) -> list[dict]:
        return self.c.pages("services")

    def get(self, name: str) -> dict:
        return self.c.get(f"services/{_quoted(name)}")

    def create(self, body: dict | None = None, **fields) -> dict:
        return self.c.post("services", {**(body or {}), **fields})

    def update(self, name: str, **fields) -> dict:
        return self.c.patch(f"services/{_quoted(name)}", fields)

    def scale(self, name: str, replicas: int | dict) -> dict:
        return self.c.post(f"services/{_quoted(name)}/scale", {"replicas": replicas})

    def delete(self, name: str) -> None:
        self.c.delete(f"services/{_quoted(name)}")

    def logs(self, name: str, replica: int | None = None) -> str:
        params = {"replica": replica} if replica is not None else {}
        return self.c.request("GET", f"services/{_quoted(name)}/logs", params=params).text


class Keys:
    def __init__(self, client: Api):
        self.c = client

    def list(self) -> list[dict]:
        return self.c.pages("api-keys")

    def create(self, label: str = "") -> dict:
        """A new key; its secret (`key`) is in this answer only."""
        return self.c.post("api-keys", {"label": label})

    def revoke(self, key_id: int) -> None:
        self.c.delete(f"api-keys/{int(key_id)}")


def _quoted(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


class Arrays:
    """Job arrays: `client.jobs.submit(..., array={"count": N, "parallelism": P})` makes one; these read and
    steer it. `index` (cancel, retry): one task instead of the whole array."""

    def __init__(self, client: Api):
        self.c = client

    def list(self, *, limit: int | None = 50) -> list[dict]:
        return self.c.pages("arrays", limit=limit)

    def get(self, array_id: int) -> dict:
        """The array with `state` and `counts` per task state."""
        return self.c.get(f"arrays/{int(array_id)}")

    def tasks(self, array_id: int, *, state: str | None = None, limit: int | None = None) -> list[dict]:
        return self.c.pages(f"arrays/{int(array_id)}/tasks", limit=limit, state=state)

    def cancel(self, array_id: int, *, index: int | None = None) -> dict:
        return self.c.post(f"arrays/{int(array_id)}/cancel", {} if index is None else {"index": int(index)})

    def retry(self, array_id: int, *, index: int | None = None) -> dict:
        """Every task that ended without success (or one ended index) runs again."""
        return self.c.post(f"arrays/{int(array_id)}/retry", {} if index is None else {"index": int(index)})

    def wait(self, array_id: int, *, every: float = 1.0, on_change=None) -> dict:
        """Poll until every task ended; `on_change(array)` sees each new set of counts. Returns the ended array."""
        import time

        last = None
        while True:
            arr = self.get(array_id)
            if on_change is not None and arr.get("counts") != last:
                last = arr.get("counts")
                on_change(arr)
            if arr.get("state") in ENDED_ARRAY:
                return arr
            time.sleep(every)


ENDED_ARRAY = frozenset({"succeeded", "failed", "cancelled"})
