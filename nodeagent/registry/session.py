"""One pull's conversation with a registry (the v2 HTTP API): manifests and blobs by GET, an anonymous bearer
token from the realm the registry names, and redirects followed one hop at a time. Every request, the realm's
and each redirect's included, goes through the pinned client (nodeagent/registry/dial.py), so every hop and
every address is checked; the token is only ever sent to the registry's own origin.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from urllib.parse import urlencode, urljoin, urlsplit

import httpx

from nodeagent.imageref import DEFAULT_REGISTRY, ImageRef
from nodeagent.registry import dial
from nodeagent.registry.failure import (
    NOT_FOUND,
    REFUSED,
    TIMED_OUT,
    UNAUTHORIZED,
    UNREACHABLE,
    UNSUPPORTED,
    Failed,
)
from nodeagent.registry.manifest import Blob

DOCKER_HUB = "registry-1.docker.io"
MAX_HOPS = 8  # redirects for one request (Docker's client follows 10)
MAX_TOKEN_BYTES = 1024**2
CHUNK = 256 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_PARAM = re.compile(r'(\w+)="([^"]*)"')


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """`Bearer realm="…",service="…"` → ("bearer", {"realm": …, "service": …})."""
    scheme, _, rest = header.strip().partition(" ")
    return scheme.lower(), {k.lower(): v for k, v in _PARAM.findall(rest)}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _form(url: str) -> None:
    """A hop's URL: http(s) with a host and no user information (the address is checked at connect)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise Failed(UNREACHABLE, f"not a valid URL: {url[:200]!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        raise Failed(UNREACHABLE, f"not an http(s) URL with a host: {url[:200]!r}")


class Session:
    """`insecure`: the engine treats the registry as insecure (its insecure-registries): https without
    verification first, then plain http, as dockerd does; only for the registry's own host."""

    def __init__(self, ref: ImageRef, policy: dial.DialPolicy, *, deadline: float, insecure: bool = False):
        self.ref = ref
        self.host = DOCKER_HUB if ref.registry == DEFAULT_REGISTRY else ref.registry
        self.deadline = deadline
        self.insecure = insecure
        self.scheme = "https"
        self.decided = not insecure
        self.token: str | None = None
        self.client = dial.pinned_client(policy)
        self.lax = dial.pinned_client(policy, verify=False) if insecure else None

    def close(self) -> None:
        self.client.close()
        if self.lax is not None:
            self.lax.close()

    @property
    def base(self) -> str:
        return f"{self.scheme}://{self.host}"

    # --- one request --------------------------------------------------------------------------------------
    def _timeout(self) -> httpx.Timeout:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise Failed(TIMED_OUT, "the pull's deadline passed")
        return httpx.Timeout(min(dial.READ_SECONDS, left), connect=min(dial.CONNECT_SECONDS, left))

    def _send(self, url: str, headers: dict[str, str]) -> httpx.Response:
        _form(url)
        own = _origin(url) == _origin(self.base)
        client = self.lax if own and self.lax is not None and url.startswith("https:") else self.client
        try:
            return client.send(client.build_request("GET", url, headers=headers, timeout=self._timeout()), stream=True)
        except httpx.HTTPError as exc:
            if isinstance(exc.__cause__, dial.Forbidden):
                raise Failed(REFUSED, str(exc.__cause__)) from None
            raise Failed(UNREACHABLE, f"{type(exc).__name__}: {exc}"[:300]) from None

    def _get(self, url: str, *, accept: str | None = None, auth: bool = True) -> httpx.Response:
        """GET, following redirects one hop at a time (each hop's URL and addresses checked); a 401 from the
        registry's own origin fetches a token once. The caller reads (bounded) and closes the response."""
        tried_token = False
        for _ in range(MAX_HOPS + 1):
            headers = {"Accept": accept} if accept else {}
            own = _origin(url) == _origin(self.base)
            if auth and own and self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            resp = self._send(url, headers)
            if resp.status_code == 401 and auth and own and not tried_token:
                challenge = resp.headers.get("www-authenticate", "")
                resp.close()
                self.token = self._fetch_token(challenge)
                tried_token = True
                continue
            if resp.status_code in _REDIRECTS:
                location = resp.headers.get("location", "")
                resp.close()
                if not location:
                    raise Failed(UNREACHABLE, "a redirect without a location")
                url = urljoin(url, location)
                continue
            return resp
        raise Failed(UNREACHABLE, "too many redirects")

    def _fetch_token(self, challenge: str) -> str:
        scheme, params = parse_challenge(challenge)
        realm = params.get("realm", "")
        if scheme != "bearer" or not realm:
            raise Failed(UNAUTHORIZED, f"challenge {scheme!r}: only anonymous bearer tokens")
        query = {"scope": f"repository:{self.ref.repository}:pull"}
        if params.get("service"):
            query["service"] = params["service"]
        url = realm + ("&" if "?" in realm else "?") + urlencode(query)
        resp = self._get(url, auth=False)
        try:
            if resp.status_code != 200:
                raise Failed(UNAUTHORIZED, f"the token realm answered {resp.status_code}")
            body = self.read(resp, MAX_TOKEN_BYTES)
        finally:
            resp.close()
        try:
            doc = httpx.Response(200, content=body).json()
            token = doc.get("token") or doc.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_BYTES:
            raise Failed(UNAUTHORIZED, "the token realm answered no token")
        return token

    # --- what a pull reads ----------------------------------------------------------------------------------
    def read(self, resp: httpx.Response, limit: int) -> bytes:
        """The whole body, at most `limit` bytes, within the deadline."""
        out = bytearray()
        try:
            for chunk in resp.iter_raw(CHUNK):
                out += chunk
                if len(out) > limit:
                    raise Failed(UNSUPPORTED, f"a body larger than {limit} bytes")
                self._timeout()
        except httpx.HTTPError as exc:
            raise Failed(UNREACHABLE, f"{type(exc).__name__}: {exc}"[:300]) from None
        return bytes(out)

    def get_registry(self, path: str, *, accept: str | None = None) -> httpx.Response:
        """A path on the registry (`/v2/…`). For an insecure registry, the first request picks the scheme."""
        if self.decided:
            return self._get(self.base + path, accept=accept)
        try:
            resp = self._get(self.base + path, accept=accept)
        except Failed as exc:
            if exc.kind != UNREACHABLE:
                raise
            self.scheme = "http"
            resp = self._get(self.base + path, accept=accept)
        self.decided = True
        return resp

    def manifest(self, reference: str, accept: str, *, limit: int) -> tuple[bytes, str]:
        resp = self.get_registry(f"/v2/{self.ref.repository}/manifests/{reference}", accept=accept)
        try:
            if resp.status_code == 404:
                raise Failed(NOT_FOUND, "manifest unknown")
            if resp.status_code in (401, 403):
                raise Failed(UNAUTHORIZED, f"the registry answered {resp.status_code}")
            if resp.status_code != 200:
                raise Failed(UNREACHABLE, f"the registry answered {resp.status_code} for the manifest")
            return self.read(resp, limit), resp.headers.get("content-type", "")
        finally:
            resp.close()

    def blob(self, blob: Blob) -> Iterator[bytes]:
        """The blob's bytes as they arrive, checked against its size and digest; the last chunk is held back until
        both match, so a blob that lies never reaches the engine whole."""
        resp = self.get_registry(f"/v2/{self.ref.repository}/blobs/{blob.digest}")
        try:
            if resp.status_code != 200:
                raise Failed(UNREACHABLE, f"the registry answered {resp.status_code} for blob {blob.digest}")
            digest, seen, held = hashlib.sha256(), 0, b""
            try:
                for chunk in resp.iter_raw(CHUNK):
                    seen += len(chunk)
                    if seen > blob.size:
                        raise Failed(UNSUPPORTED, f"blob {blob.digest} is larger than its manifest says")
                    digest.update(chunk)
                    if held:
                        yield held
                    held = chunk
                    self._timeout()
            except httpx.HTTPError as exc:
                raise Failed(UNREACHABLE, f"{type(exc).__name__}: {exc}"[:300]) from None
            if seen != blob.size or "sha256:" + digest.hexdigest() != blob.digest:
                raise Failed(UNSUPPORTED, f"blob {blob.digest}: its bytes do not match its digest or size")
            if held:
                yield held
        finally:
            resp.close()
