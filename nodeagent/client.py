"""The daemon's HTTP client for the node-agent protocol: one thread-safe httpx.Client, two error kinds.

`Unreachable` (connection error, timeout, 5xx): try again later. `Refused` (4xx): the server said no.
"""

from __future__ import annotations

import contextlib
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
        self.allow_insecure = allow_insecure
        self._credential = credential
        self._lock = threading.Lock()
        self._http = httpx.Client(
            base_url=self.base_url + API_PREFIX,
            timeout=httpx.Timeout(10.0, connect=5.0),
            follow_redirects=False,
            trust_env=False,
            verify=tls_context(ca_file),
            limits=httpx.Limits(
                max_connections=16, max_keepalive_connections=8, keepalive_expiry=protocol.CLIENT_KEEPALIVE_SECONDS
            ),
        )
        # Presigned object-store URLs (outputs, inputs): no base URL, never the node credential.
        self._plain = httpx.Client(
            timeout=httpx.Timeout(60.0, connect=5.0),
            follow_redirects=False,
            trust_env=False,
            verify=tls_context(ca_file),
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=4),
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
        return _answer(response, strict=True)

    def _target(self, url: str, authenticated: bool) -> tuple[httpx.Client, str, dict]:
        """Which client sends to `url` (a node-API path, or an absolute URL) and the headers it adds.

        The credential goes only to this agent's control plane: an authenticated absolute URL (the server names
        itself by its public URL, which may not be the one this agent reaches it by) is sent to the same node-API
        path here, never to the host it names.
        """
        if "://" not in url:
            headers = {"Authorization": f"Bearer {self._credential}"} if authenticated and self._credential else {}
            return self._http, url.lstrip("/"), headers
        if authenticated:
            parts = urlsplit(url)
            at = parts.path.find(API_PREFIX)
            if at < 0:
                raise Refused(400, "foreign_url", {"detail": f"not a node-API URL: {url[:200]}"})
            path = parts.path[at + len(API_PREFIX) :] + (f"?{parts.query}" if parts.query else "")
            headers = {"Authorization": f"Bearer {self._credential}"} if self._credential else {}
            return self._http, path, headers
        try:
            check_url(url, allow_insecure=self.allow_insecure)
        except InsecureURL as exc:
            raise Refused(400, "insecure_url", {"detail": str(exc)}) from None
        return self._plain, url, {}

    def send(
        self,
        method: str,
        url: str,
        *,
        content=None,
        headers: dict | None = None,
        authenticated: bool = True,
        timeout: float = 120,
    ) -> dict:
        """A request with a raw body (an output chunk, a presigned PUT): the JSON answer, or Unreachable/Refused."""
        http, target, extra = self._target(url, authenticated)
        try:
            response = http.request(
                method, target, content=content, headers={**(headers or {}), **extra}, timeout=timeout
            )
        except httpx.HTTPError as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
        return _answer(response, strict=False)

    @contextlib.contextmanager
    def download(self, url: str, *, authenticated: bool = True, timeout: float = 120):
        """A streamed GET (an input file): yields the httpx response once its status is 2xx."""
        http, target, extra = self._target(url, authenticated)
        try:
            with http.stream("GET", target, headers=extra, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    _answer(response, strict=False)
                yield response
        except httpx.HTTPError as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self._http.close()
        self._plain.close()


def _answer(response: httpx.Response, *, strict: bool) -> dict:
    """A response as the protocol reads it: 5xx Unreachable, 4xx Refused, else its JSON object ({} if none)."""
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
        if strict:
            raise Unreachable("server answered with a body that is not a JSON object")
        return {}
    return data
