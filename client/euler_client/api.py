"""What the resource modules (jobs, outputs, resources, workflows) need of a client: a typing Protocol.

`Client` and `LightClient` (client.py) satisfy it and build the resources; the resources know only this, so
client.py imports them and never the other way round (.importlinter: client-resources-below-client). Imported
for annotations only (under TYPE_CHECKING): `typing` costs the CLI start-up time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import contextlib

    import httpx


class Api(Protocol):
    url: str
    api_key: str
    timeout: float  # seconds: the read timeout of each call

    @property
    def http(self) -> httpx.Client: ...

    def reaching(self) -> contextlib.AbstractContextManager[None]: ...

    def request(self, method: str, path: str, **kwargs): ...

    def get(self, path: str, **params) -> object: ...

    def post(self, path: str, body: dict | None = None) -> object: ...

    def patch(self, path: str, body: dict) -> object: ...

    def delete(self, path: str) -> None: ...

    def pages(self, path: str, *, limit: int | None = None, **params) -> list[dict]: ...

    def websocket_url(self, path: str) -> str: ...
