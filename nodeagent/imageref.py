"""Image references and the image policy: one parser and one registry check, used by the API at submit and
by the node agent before it pulls.

Pure (no Django, no third-party imports), like nodeagent/netaddr.py: the server's job validation and the
scheduler import it beside nodeagent/protocol.py; that is the whole of what the two sides share.

The grammar is Docker's (docker/distribution `reference`): `[registry[:port]/]path[:tag][@digest]`, where the
first path component names a registry only when it holds a '.' or a ':', is `localhost`, or holds an upper-case
letter (repositories are lower case); otherwise the registry is Docker Hub (`docker.io`, one-component names
under `library/`).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from nodeagent.netaddr import METADATA_NAMES, address_refusal

DEFAULT_REGISTRY = "docker.io"
LEGACY_REGISTRIES = frozenset({"index.docker.io", "registry-1.docker.io"})
OFFICIAL_PREFIX = "library/"
MAX_NAME = 255
MAX_REFERENCE = 512
RESOLVE_SECONDS = 2.0

_ALNUM = r"[a-z0-9]+"
_SEP = r"(?:[._]|__|-+)"
_COMPONENT = rf"{_ALNUM}(?:{_SEP}{_ALNUM})*"
_PATH = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9a-fA-F:.]+\])(?::[0-9]{{1,5}})?")
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
_HEX64 = re.compile(r"[a-f0-9]{64}")


class InvalidReference(ValueError):
    """Not an image reference; the message says what is wrong (safe to show)."""


@dataclass(frozen=True)
class ImageRef:
    registry: str  # host[:port], lower case; "docker.io" for Docker Hub
    repository: str  # e.g. "library/alpine"
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """registry/repository: what allow-lists match."""
        return f"{self.registry}/{self.repository}"

    @property
    def host(self) -> str:
        """The registry's host, without port or IPv6 brackets."""
        host = self.registry
        if host.startswith("["):
            return host[1 : host.index("]")]
        return host.rsplit(":", 1)[0] if ":" in host else host

    @property
    def port(self) -> int | None:
        rest = self.registry[self.registry.index("]") + 1 :] if self.registry.startswith("[") else self.registry
        return int(rest.rsplit(":", 1)[1]) if ":" in rest else None

    @property
    def pull_tag(self) -> str | None:
        """The tag a pull asks for: the tag, `latest` when neither tag nor digest is given, None for a digest."""
        if self.digest:
            return None
        return self.tag or "latest"

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def _is_domain(first: str) -> bool:
    return "." in first or ":" in first or first == "localhost" or first.lower() != first


def parse(text: object) -> ImageRef:
    """A reference as Docker reads it (normalised); raises InvalidReference."""
    if not isinstance(text, str) or not text or len(text) > MAX_REFERENCE:
        raise InvalidReference(f"an image reference is 1 to {MAX_REFERENCE} characters")
    name, _, digest = text.partition("@")
    if _ and not _DIGEST.fullmatch(digest):
        raise InvalidReference("the digest is not algorithm:hex (e.g. sha256:…)")
    tag = None
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG.fullmatch(tag):
            raise InvalidReference("the tag is at most 128 letters, digits, '_', '.' or '-'")
    first, sep, rest = name.partition("/")
    if sep and _is_domain(first):
        registry, path = first, rest
        if not _DOMAIN.fullmatch(registry):
            raise InvalidReference(f"{registry[:100]!r} is not a registry host[:port]")
        registry = registry.lower()
    else:
        registry, path = DEFAULT_REGISTRY, name
        if _HEX64.fullmatch(path):
            raise InvalidReference("a 64-hex-digit name is an image ID, not a reference")
    if not _PATH.fullmatch(path):
        raise InvalidReference("the repository is lower-case letters, digits and separators ('.', '_', '-', '/')")
    if registry in LEGACY_REGISTRIES:
        registry = DEFAULT_REGISTRY
    if registry == DEFAULT_REGISTRY and "/" not in path:
        path = OFFICIAL_PREFIX + path
    if len(registry) + 1 + len(path) > MAX_NAME:
        raise InvalidReference(f"the image name is longer than {MAX_NAME} characters")
    return ImageRef(registry=registry, repository=path, tag=tag, digest=digest or None)


# --- the registry policy (pure) --------------------------------------------------------------------------
def _listed(ref: ImageRef, hosts: Iterable[str]) -> bool:
    """An entry `host` opens every port of that host, `host:port` only that port."""
    for entry in hosts:
        entry = entry.strip().lower()
        if entry and (entry == ref.registry or entry == ref.host):
            return True
    return False


def form_refusal(ref: ImageRef, *, allowed: Iterable[str] = ()) -> str | None:
    """Why the registry is refused from its name alone (an IP literal, a local-only name), or None.

    `allowed`: registries an operator (EULER_ALLOWED_REGISTRIES) or a lender named: they pass whatever they are.
    """
    if _listed(ref, allowed) or ref.registry == DEFAULT_REGISTRY:
        return None
    host = ref.host
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return f"the registry {ref.registry} is an IP address; images come from registries named by host name"
    if host in METADATA_NAMES or host.endswith((".localhost", ".internal", ".local")):
        return f"the registry {ref.registry} is a local-only name"
    return None


def registry_refusal(ref: ImageRef, addresses: Iterable[str] | None, *, allowed: Iterable[str] = ()) -> str | None:
    """The one decision: why this image's registry may not be contacted, or None.

    `addresses`: what the registry's host resolved to; None when it was not resolved (at submit, a name that
    does not resolve there is left to the agent, which resolves it again before it pulls).
    """
    allowed = tuple(allowed)
    why = form_refusal(ref, allowed=allowed)
    if why or _listed(ref, allowed) or ref.registry == DEFAULT_REGISTRY or addresses is None:
        return why
    addresses = list(addresses)
    if not addresses:
        return f"the registry {ref.registry} does not resolve"
    for address in addresses:
        if address_refusal(address):
            return f"the registry {ref.registry} resolves to an address that is not on the public internet"
    return None


# --- the lender's narrowing: EULER_NODE_ALLOWED_IMAGES ----------------------------------------------------
def normalize_pattern(pattern: str) -> str:
    """`ghcr.io` (a whole registry), `alpine`, `myorg/*`, `ghcr.io/org/*` → a pattern over `registry/repository`.

    A first component is a registry by Docker's rule; `*` alone stands for every image.
    """
    pattern = pattern.strip()
    if pattern == "*":
        return "*"
    first, sep, rest = pattern.partition("/")
    if not sep:
        if _is_domain(first):
            return f"{first.lower()}/*"
        return f"{DEFAULT_REGISTRY}/{OFFICIAL_PREFIX}{first}"
    if _is_domain(first):
        first = first.lower()
        return f"{DEFAULT_REGISTRY if first in LEGACY_REGISTRIES else first}/{rest}"
    return f"{DEFAULT_REGISTRY}/{pattern}"


def pattern_error(pattern: str) -> str | None:
    """Why a lender's pattern is not usable, or None."""
    if not pattern or len(pattern) > MAX_NAME or any(c.isspace() or c in "@[]" for c in pattern.strip()):
        return f"{pattern[:100]!r} is not an image or registry pattern"
    return None


@lru_cache(maxsize=4096)
def allowed_by(image: str, patterns: tuple[str, ...]) -> bool:
    """Whether a job's image (as submitted) is one the node's patterns allow; no patterns: every image."""
    if not patterns:
        return True
    try:
        name = parse(image).name
    except InvalidReference:
        return False
    return any(fnmatch.fnmatchcase(name, normalize_pattern(p)) for p in patterns)


def named_registries(patterns: Iterable[str]) -> tuple[str, ...]:
    """The registries a lender names in its patterns (they pass the address check on that node)."""
    found = []
    for pattern in patterns:
        registry = normalize_pattern(pattern).split("/", 1)[0]
        if registry not in ("*", DEFAULT_REGISTRY) and "*" not in registry and "?" not in registry:
            found.append(registry)
    return tuple(dict.fromkeys(found))


# --- resolution (the shell) ------------------------------------------------------------------------------
def _system_resolve(host: str) -> list[str]:
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# The resolver at the boundary: tests swap it for one that answers private addresses.
resolver: Callable[[str], list[str]] = _system_resolve


def resolve(host: str, *, timeout: float = RESOLVE_SECONDS) -> list[str] | None:
    """The host's addresses; [] when it does not resolve; None when the resolver did not answer in time."""
    box: dict[str, list[str]] = {}

    def work() -> None:
        try:
            box["found"] = resolver(host)
        except (OSError, UnicodeError):
            box["found"] = []

    thread = threading.Thread(target=work, daemon=True, name="euler-resolve")
    thread.start()
    thread.join(timeout)
    return box.get("found")


def check(ref: ImageRef, *, allowed: Iterable[str] = (), unresolved_ok: bool) -> str | None:
    """Apply `registry_refusal` with the host resolved now. `unresolved_ok`: a name that does not resolve (or
    not in time) passes (submit: the agent checks again); else it is refused (the agent, before a pull)."""
    allowed = tuple(allowed)
    why = form_refusal(ref, allowed=allowed)
    if why or _listed(ref, allowed) or ref.registry == DEFAULT_REGISTRY:
        return why
    addresses = resolve(ref.host)
    if not addresses:
        return None if unresolved_ok else f"the registry {ref.registry} does not resolve"
    return registry_refusal(ref, addresses, allowed=allowed)
