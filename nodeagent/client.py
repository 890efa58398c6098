"""The daemon's HTTP client for the node-agent protocol: one thread-safe httpx.Client, two error kinds.

`Unreachable` (connection error, timeout, 5xx): try again later. `Refused` (4xx): the server said no.
"""

from __future__ import annotations

import ipaddress
import ssl
import threading
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from nodeagent import protocol

API_PREFIX = "/node-api/v1/"


class Unreachable(Exception):
    """The control plane did not answer usefully (connection error, timeout, 5xx)."""


class Refused(Exception):
    """The control plane answered 4xx."""

    def __init__(self, status: int, code: str, body: dict) -> None:
        self.status = status
        self.code = code
        self.body = body
        detail = body.get("detail", "") if isinstance(body, dict) else ""
        super().__init__(f"{status} {code}: {detail}")


class InsecureURL(ValueError):
    """An http:// control plane URL to a host that is not loopback, without the explicit insecure flag."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_url(url: str, *, allow_insecure: bool = False) -> str:
    """The control plane URL, normalised; refuses plain HTTP to a remote host (a credential would travel in clear)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InsecureURL(f"EULER_CONTROL_PLANE_URL must be an http(s) URL with a host, got {url!r}")
    if parts.scheme == "http" and not allow_insecure and not _is_loopback(parts.hostname):
        raise InsecureURL(
            f"refusing plain http:// to {parts.hostname}: the node credential would travel in clear. "
            "Use https://, or set EULER_ALLOW_INSECURE_HTTP=true on an isolated test network only."
        )
    base = f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")
    if base.endswith(API_PREFIX.rstrip("/")):
        base = base[: -len(API_PREFIX.rstrip("/"))]
    return base


def tls_context(ca_file: Path | str | None) -> ssl.SSLContext | bool:
    """What httpx verifies the server with: the CA file alone when one is given (a platform behind a private CA,
    e.g. Caddy's `tls internal`: no other CA is trusted then), else the public CAs (certifi)."""
    if not ca_file:
        return True
    return ssl.create_default_context(cafile=str(ca_file))


class ControlPlaneClient:
    def __init__(
        self,
        base_url: str,
        credential: str | None = None,
        allow_insecure: bool = False,
        ca_file: Path | str | None = None,
    ) -> None:
        self.base_url = check_url(base_url, allow_insecure=allow_insecure)
        self._credential = credential
        self._lock = threading.Lock()
        self._http = httpx.Client(
            base_url=self.base_url + API_PREFIX,
            timeout=httpx.Timeout(10.0, connect=5.0),
            follow_redirects=False,
            trust_env=False,
            verify=tls_context(ca_file),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=8),
        )

    @property
    def credential(self) -> str | None:
        return self._credential

    def set_credential(self, credential: str | None) -> None:
        with self._lock:
            self._credential = credential

    def call(self, method: str, path: str, body: dict | None = None, timeout: float = 10) -> dict:
        headers = {"Accept": "application/json"}
        credential = self._credential
        if credential:
            headers["Authorization"] = f"Bearer {credential}"
        content = None
        if body is not None:
            # The same encoder the log shipper sizes its batches with (protocol.MAX_LOG_REQUEST_BYTES).
            content = protocol.encode_json(body)
            headers["Content-Type"] = "application/json"
        try:
            response = self._http.request(method, path.lstrip("/"), content=content, headers=headers, timeout=timeout)
        except httpx.HTTPError as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
        try:
            data = response.json() if response.content else {}
        except ValueError:
            data = {}
        if response.status_code >= 500:
            raise Unreachable(f"server answered {response.status_code}")
        if response.status_code >= 400:
            code = data.get("code", "error") if isinstance(data, dict) else "error"
            raise Refused(response.status_code, code, data if isinstance(data, dict) else {})
        if not isinstance(data, dict):
            raise Unreachable("server answered with a body that is not a JSON object")
        return data

    def close(self) -> None:
        self._http.close()
