"""The agent's own registry client: a pull in which every connection passes the node's address policy.

`pull()` is the entry point (nodeagent/images.py calls it): it reads the manifest (an index resolved to the
engine's platform), the config and the layers over the pinned client (nodeagent/registry/dial.py: each token
realm, each redirect, each resolved address checked, the checked address dialled), verifies each against its
digest, and streams them to the engine as a `docker load` archive (nodeagent/registry/archive.py), bounded
in size and time. The engine itself never dials a registry for a job's image.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Iterable, Iterator

import requests
from docker import errors as derrors

from nodeagent.imageref import ImageRef
from nodeagent.registry import archive, manifest
from nodeagent.registry.dial import DialPolicy
from nodeagent.registry.failure import LOAD_FAILED, TIMED_OUT, TOO_LARGE, UNSUPPORTED, Failed
from nodeagent.registry.session import Session

__all__ = ["DialPolicy", "Failed", "insecure_registry", "pull"]

log = logging.getLogger("euler.nodeagent.registry")


def insecure_registry(registry_config: dict | None, ref: ImageRef, addresses: Iterable[str] | None) -> bool:
    """Pure: whether the engine treats this registry as insecure, by dockerd's own rule (its `IndexConfigs`
    entry, else any resolved address inside `InsecureRegistryCIDRs`, 127.0.0.0/8 by default)."""
    config = registry_config or {}
    entry = (config.get("IndexConfigs") or {}).get(ref.registry)
    if isinstance(entry, dict) and "Secure" in entry:
        return not entry["Secure"]
    networks = []
    for cidr in config.get("InsecureRegistryCIDRs") or []:
        try:
            networks.append(ipaddress.ip_network(cidr, strict=False))
        except (TypeError, ValueError):
            continue
    for address in addresses or ():
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            continue
        if any(ip.version == net.version and ip in net for net in networks):
            return True
    return False


def _image(session: Session, ref: ImageRef, platform: tuple[str, str, str]) -> tuple[manifest.Image, bytes]:
    wanted = ref.digest or ref.pull_tag or "latest"
    body, kind = session.manifest(wanted, manifest.ACCEPT, limit=manifest.MAX_MANIFEST_BYTES)
    try:
        if ref.digest and manifest.digest_of(body) != ref.digest:
            raise manifest.Unsupported("the manifest does not match the digest asked for")
        doc = manifest.load(body, kind)
        if manifest.is_index(doc):
            os_, arch, variant = platform
            chosen = manifest.pick_platform(doc, os=os_, arch=arch, variant=variant)
            body, kind = session.manifest(chosen, manifest.ACCEPT, limit=manifest.MAX_MANIFEST_BYTES)
            if manifest.digest_of(body) != chosen:
                raise manifest.Unsupported("the platform's manifest does not match its digest in the index")
            doc = manifest.load(body, kind)
        image = manifest.image_of(doc)
    except manifest.Unsupported as exc:
        raise Failed(UNSUPPORTED, str(exc)) from None
    config = b"".join(session.blob(image.config))
    return image, config


def _load(api, data: Iterator[bytes], deadline: float) -> None:
    try:
        for event in api.load_image(data):
            if isinstance(event, dict) and (event.get("error") or event.get("errorDetail")):
                raise Failed(LOAD_FAILED, str(event.get("error") or event.get("errorDetail"))[:300])
            if time.monotonic() > deadline:
                raise Failed(TIMED_OUT, "the engine was still loading at the deadline")
    except derrors.APIError as exc:
        raise Failed(LOAD_FAILED, str(exc.explanation or exc)[:300]) from None
    except requests.exceptions.RequestException as exc:
        raise Failed(LOAD_FAILED, f"the engine: {type(exc).__name__}") from None


def pull(
    api,
    ref: ImageRef,
    *,
    tag: str,
    policy: DialPolicy,
    deadline: float,
    max_bytes: int,
    platform: tuple[str, str, str] = ("linux", "amd64", ""),
    insecure: bool = False,
) -> None:
    """Fetch `ref` through the policy and load it into the engine `api` under `tag`; raises Failed."""
    session = Session(ref, policy, deadline=deadline, insecure=insecure)
    try:
        image, config = _image(session, ref, platform)
        if image.total > max_bytes:
            raise Failed(TOO_LARGE, f"{image.total} bytes")
        _load(api, archive.stream(image, config, tag, session.blob), deadline)
    finally:
        session.close()
