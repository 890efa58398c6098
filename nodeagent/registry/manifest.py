"""Registry manifests as plain data (pure): parse an image manifest or an index, pick this engine's platform
from an index, and check every descriptor (digest form, size, kind) before a byte of a blob is fetched.

Docker's schema 2 and OCI's image manifest and index are read; schema 1 (deprecated since 2017) and foreign
(non-distributable) layers are not supported.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

MAX_MANIFEST_BYTES = 4 * 1024**2  # as containerd's limit
MAX_CONFIG_BYTES = 8 * 1024**2
MAX_LAYERS = 256

INDEX_TYPES = frozenset(
    {"application/vnd.docker.distribution.manifest.list.v2+json", "application/vnd.oci.image.index.v1+json"}
)
IMAGE_TYPES = frozenset(
    {"application/vnd.docker.distribution.manifest.v2+json", "application/vnd.oci.image.manifest.v1+json"}
)
ACCEPT = ", ".join(sorted(INDEX_TYPES | IMAGE_TYPES))
LAYER_TYPES = frozenset(
    {
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
    }
)
CONFIG_TYPES = frozenset({"application/vnd.docker.container.image.v1+json", "application/vnd.oci.image.config.v1+json"})
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
DEFAULT_VARIANT = {"arm64": "v8", "arm": "v7"}


class Unsupported(ValueError):
    """The registry's answer is not an image this agent can load; the message is for the agent's log only."""


@dataclass(frozen=True)
class Blob:
    digest: str  # sha256:<64 hex>
    size: int

    @property
    def hex(self) -> str:
        return self.digest.split(":", 1)[1]


@dataclass(frozen=True)
class Image:
    config: Blob
    layers: tuple[Blob, ...]

    @property
    def total(self) -> int:
        return self.config.size + sum(layer.size for layer in self.layers)


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob(entry: object, kinds: frozenset[str], what: str) -> Blob:
    if not isinstance(entry, dict):
        raise Unsupported(f"{what}: not an object")
    digest, size, kind = entry.get("digest"), entry.get("size"), entry.get("mediaType")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise Unsupported(f"{what}: the digest is not sha256:<64 lower-case hex>")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise Unsupported(f"{what}: the size is not a whole number")
    if kind not in kinds:
        raise Unsupported(f"{what}: media type {str(kind)[:100]!r} is not supported")
    return Blob(digest=digest, size=size)


def load(body: bytes, content_type: str) -> dict:
    """The manifest or index as a dict with its `mediaType` set (from the body, else the response's header)."""
    if len(body) > MAX_MANIFEST_BYTES:
        raise Unsupported("the manifest is larger than 4 MiB")
    try:
        doc = json.loads(body)
    except ValueError:
        raise Unsupported("the manifest is not JSON") from None
    if not isinstance(doc, dict):
        raise Unsupported("the manifest is not a JSON object")
    kind = doc.get("mediaType") or content_type.split(";", 1)[0].strip()
    if kind not in INDEX_TYPES | IMAGE_TYPES:
        raise Unsupported(f"manifest media type {str(kind)[:100]!r} is not supported (schema 1?)")
    return {**doc, "mediaType": kind}


def is_index(doc: dict) -> bool:
    return doc["mediaType"] in INDEX_TYPES


def pick_platform(doc: dict, *, os: str, arch: str, variant: str = "") -> str:
    """The digest of the index entry for this engine's platform (an exact variant first, else the default one,
    else any); raises Unsupported when the index has none."""
    found: list[tuple[int, str]] = []
    for i, entry in enumerate(doc.get("manifests") or []):
        if not isinstance(entry, dict):
            continue
        plat = entry.get("platform") or {}
        if plat.get("os") != os or plat.get("architecture") != arch:
            continue
        if entry.get("mediaType") not in IMAGE_TYPES or not _DIGEST.fullmatch(str(entry.get("digest"))):
            continue
        has = plat.get("variant") or ""
        wanted = variant or DEFAULT_VARIANT.get(arch, "")
        rank = 0 if has == wanted else 1 if not has else 2
        found.append((rank * 10_000 + i, entry["digest"]))
    if not found:
        raise Unsupported(f"the index has no image for {os}/{arch}")
    return min(found)[1]


def image_of(doc: dict) -> Image:
    """The config and layers of an image manifest, each descriptor checked."""
    if doc["mediaType"] not in IMAGE_TYPES:
        raise Unsupported("not an image manifest")
    config = _blob(doc.get("config"), CONFIG_TYPES, "config")
    if config.size > MAX_CONFIG_BYTES:
        raise Unsupported("the image config is larger than 8 MiB")
    layers = doc.get("layers")
    if not isinstance(layers, list) or len(layers) > MAX_LAYERS:
        raise Unsupported(f"the manifest lists no layers, or more than {MAX_LAYERS}")
    return Image(config=config, layers=tuple(_blob(e, LAYER_TYPES, f"layer {i}") for i, e in enumerate(layers)))
