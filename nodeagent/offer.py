"""What the lender lets this node offer (caps on CPU, memory, disk, GPUs) and the job network policy: pure.

The lender's settings come from the environment; the node reports the smaller of the machine and each cap.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from nodeagent import protocol

EGRESS_PUBLIC = "public"  # the internet yes; the host, private, CGNAT, link-local, multicast and ULA no
EGRESS_NONE = "none"  # no network at all: every job gets loopback only
EGRESS_UNRESTRICTED = "unrestricted"  # the lender explicitly skips the rules (shown on the node)
EGRESS_POLICIES = (EGRESS_PUBLIC, EGRESS_NONE, EGRESS_UNRESTRICTED)


class OfferError(ValueError):
    """A lender setting is wrong; the message names the variable."""


@dataclass(frozen=True)
class Caps:
    """The lender's caps; None: no cap (the machine's figure). `gpus`: indexes or UUIDs to offer, None: all."""

    cpu_milli: int | None = None
    memory_bytes: int | None = None
    disk_bytes: int | None = None
    gpus: tuple[str, ...] | None = None


@dataclass(frozen=True)
class NetworkPolicy:
    egress: str = EGRESS_PUBLIC
    allowed: tuple[str, ...] = ()  # extra CIDRs the lender opens (normalised, IPv4 and IPv6)
    blocked: tuple[str, ...] = ()  # CIDRs the lender closes besides the built-in ranges (win over `allowed`)


DEFAULT_IMAGE_CACHE_BYTES = 20 * 1024**3


@dataclass(frozen=True)
class ImagePolicy:
    """The lender's image settings. `patterns` (EULER_NODE_ALLOWED_IMAGES): the images this node runs (nodeagent/
    imageref.py patterns; (): every image the control plane allows); a registry named there also passes the
    address check. `local_images` (EULER_NODE_LOCAL_IMAGES): on a community node, images already on the engine
    that Euler did not pull may run. `cache_bytes` (EULER_NODE_IMAGE_CACHE_BYTES): the images Euler pulled here
    are pruned, least recently used first, past this size. `allowed_networks`/`blocked_networks`: the jobs'
    EULER_NODE_JOB_ALLOWED_NETWORKS/…_BLOCKED_NETWORKS, which every connection of a pull obeys too."""

    patterns: tuple[str, ...] = ()
    local_images: bool = False
    cache_bytes: int = DEFAULT_IMAGE_CACHE_BYTES
    allowed_networks: tuple[str, ...] = ()
    blocked_networks: tuple[str, ...] = ()


def _size(env: Mapping[str, str], name: str, *, minimum: int = 0) -> int | None:
    raw = (env.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OfferError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise OfferError(f"{name} must be at least {minimum}, got {raw!r}")
    return value


def parse_gpus(text: str | None) -> tuple[str, ...] | None:
    """`EULER_NODE_GPUS`: unset means every GPU; `none` (or empty after trimming commas) means no GPU;
    else comma-separated device indexes (`0,2`) or UUIDs (`GPU-…`, `MIG-…`)."""
    if text is None or not text.strip():
        return None
    if text.strip().lower() == "none":
        return ()
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    for item in items:
        if not (item.isdigit() or len(item) <= 128 and item.replace("-", "").replace("/", "").isalnum()):
            raise OfferError(f"EULER_NODE_GPUS: {item!r} is neither a device index nor a GPU UUID")
    return items


def load_caps(env: Mapping[str, str]) -> Caps:
    return Caps(
        cpu_milli=_size(env, "EULER_NODE_MAX_CPU_MILLI", minimum=1),
        memory_bytes=_size(env, "EULER_NODE_MAX_MEMORY_BYTES", minimum=1),
        disk_bytes=_size(env, "EULER_NODE_MAX_DISK_BYTES", minimum=0),
        gpus=parse_gpus(env.get("EULER_NODE_GPUS")),
    )


def load_network_policy(env: Mapping[str, str]) -> NetworkPolicy:
    egress = (env.get("EULER_NODE_JOB_EGRESS") or EGRESS_PUBLIC).strip().lower()
    if egress not in EGRESS_POLICIES:
        raise OfferError(f"EULER_NODE_JOB_EGRESS is one of {', '.join(EGRESS_POLICIES)}; got {egress!r}")
    return NetworkPolicy(
        egress=egress,
        allowed=_cidrs(env, "EULER_NODE_JOB_ALLOWED_NETWORKS"),
        blocked=_cidrs(env, "EULER_NODE_JOB_BLOCKED_NETWORKS"),
    )


def _cidrs(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    found = []
    for item in (env.get(name) or "").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            found.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise OfferError(f"{name}: {item!r} is not a CIDR (e.g. 10.8.0.0/16)") from None
    return tuple(dict.fromkeys(found))


def load_image_policy(env: Mapping[str, str]) -> ImagePolicy:
    from nodeagent.imageref import pattern_error

    patterns = tuple(
        dict.fromkeys(p.strip() for p in (env.get("EULER_NODE_ALLOWED_IMAGES") or "").split(",") if p.strip())
    )
    for pattern in patterns:
        if why := pattern_error(pattern):
            raise OfferError(f"EULER_NODE_ALLOWED_IMAGES: {why} (e.g. docker.io, ghcr.io/org/*, alpine)")
    if len(patterns) > 64:
        raise OfferError("EULER_NODE_ALLOWED_IMAGES: at most 64 patterns")
    local = (env.get("EULER_NODE_LOCAL_IMAGES") or "").strip().lower()
    if local not in ("", "0", "1", "true", "false", "yes", "no", "on", "off"):
        raise OfferError(f"EULER_NODE_LOCAL_IMAGES must be true or false, got {local!r}")
    cache = _size(env, "EULER_NODE_IMAGE_CACHE_BYTES", minimum=0)
    return ImagePolicy(
        patterns=() if patterns == ("*",) else patterns,
        local_images=local in ("1", "true", "yes", "on"),
        cache_bytes=DEFAULT_IMAGE_CACHE_BYTES if cache is None else cache,
        allowed_networks=_cidrs(env, "EULER_NODE_JOB_ALLOWED_NETWORKS"),
        blocked_networks=_cidrs(env, "EULER_NODE_JOB_BLOCKED_NETWORKS"),
    )


def _offered_gpus(gpus: list[protocol.GpuInfo], wanted: tuple[str, ...] | None) -> list[protocol.GpuInfo]:
    if wanted is None:
        return gpus
    return [g for g in gpus if str(g.index) in wanted or g.uuid in wanted]


def apply_caps(machine: protocol.Resources, caps: Caps) -> protocol.Resources:
    """The machine's resources, each capped by the lender; `capped` names what a cap lowered."""
    capped = []
    fields = {}
    for name in ("cpu_milli", "memory_bytes", "disk_bytes"):
        have, cap = getattr(machine, name), getattr(caps, name)
        if cap is not None and have is None:
            fields[name] = cap  # the machine's figure is unknown: the lender's cap is what is offered
        elif cap is not None and cap < have:
            fields[name] = cap
            capped.append(name.split("_")[0])
    gpus = _offered_gpus(machine.gpus, caps.gpus)
    if len(gpus) < len(machine.gpus):
        fields["gpus"] = gpus
        capped.append("gpus")
    return machine.model_copy(update={**fields, "capped": capped})
