"""The images jobs run on this node: the image policy before any pull, pulls whose failures reach the user as
fixed text, and the record of what Euler pulled here (the state dir's `images.json`), which the cache cap
prunes least recently used first.

Order of checks for an assignment's image: a valid reference (nodeagent/imageref.py); one the lender's
EULER_NODE_ALLOWED_IMAGES allows; already on the engine and runnable here (pulled by Euler, or on a node that
is not `community`, or the lender allows local images), else pulled by the agent itself (nodeagent/registry/):
every connection of the pull (the registry, its token realm, each redirect, each resolved address) passes the
node's address policy and is dialled at the checked address, and the verified blobs are loaded into the engine,
which never dials a registry for a job. A failure reaches the user as one fixed text per class: never what the
pull met on the lender's network, and never anything that tells an open private port from a closed one (no
private address is dialled at all).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from docker import errors as derrors

from nodeagent import imageref, registry
from nodeagent.docker_runner import RunnerError
from nodeagent.offer import ImagePolicy
from nodeagent.registry import failure

log = logging.getLogger("euler.nodeagent.images")

PULL_SECONDS = 900.0  # a pull that takes longer ends `image_pull_failed`, timed out
MAX_IMAGE_BYTES = 64 * 1024**3  # the compressed size of one image a pull fetches, config and layers
COMMUNITY = "community"
LOADED_TAG = "euler-{algorithm}-{hex}"  # a digest reference the agent loaded runs by this tag (a load sets no digest)

NOT_FOUND = "image not found: the registry has no such repository, tag or digest (or it is private)"
UNAUTHORIZED = "image pull unauthorized: the registry asks for credentials or denies access (only public images)"
TIMED_OUT = "image pull timed out"
UNREACHABLE = "image pull failed: the registry could not be reached or answered with an error"
UNSUPPORTED = (
    "image pull failed: the registry's answer is not an image this node can load (its format or platform, or "
    "bytes that do not match their digest)"
)
TOO_LARGE = f"image pull failed: the image is larger than a node loads ({MAX_IMAGE_BYTES // 1024**3} GiB)"
LOAD_FAILED = "image pull failed: the engine could not load the image"
REFUSED = "image refused by policy: {why}"
ADDRESS = "the registry or a host it sent the pull to is not on the public internet, or does not resolve"
NOT_LOCAL = (
    "the image is on this node but Euler did not pull it for a job, and this community node's lender does not "
    "allow local images (EULER_NODE_LOCAL_IMAGES)"
)
NOT_ALLOWED = "this node's lender does not allow the image (EULER_NODE_ALLOWED_IMAGES)"

TEXTS = {
    failure.REFUSED: REFUSED.format(why=ADDRESS),
    failure.NOT_FOUND: NOT_FOUND,
    failure.UNAUTHORIZED: UNAUTHORIZED,
    failure.UNREACHABLE: UNREACHABLE,
    failure.TIMED_OUT: TIMED_OUT,
    failure.UNSUPPORTED: UNSUPPORTED,
    failure.TOO_LARGE: TOO_LARGE,
    failure.LOAD_FAILED: LOAD_FAILED,
}


def failure_text(kind: str) -> str:
    """Pure: the one text the user sees for a class of pull failure (the detail is logged, never shown)."""
    return TEXTS.get(kind, UNREACHABLE)


def refused(why: str) -> RunnerError:
    return RunnerError("image_pull_failed", REFUSED.format(why=why))


def loaded_tag(ref: imageref.ImageRef) -> str:
    """The tag a pull gives the image: the reference's own; for a digest, one derived from it (an image loaded
    into the engine carries no digest reference, so `name@sha256:…` would not find it)."""
    if not ref.digest:
        return f"{ref.name}:{ref.pull_tag}"
    algorithm, _, hex_ = ref.digest.partition(":")
    return f"{ref.name}:{LOADED_TAG.format(algorithm=algorithm.lower(), hex=hex_.lower()[:100])}"


class ImageStore:
    """What Euler pulled on this node: {image id: {"refs": [...], "used": unix time, "size": bytes}}."""

    def __init__(self, api, state_dir: Path, policy: ImagePolicy | None = None, *, pull_seconds: float = PULL_SECONDS):
        self.api = api
        self.path = Path(state_dir) / "images.json"
        self.policy = policy or ImagePolicy()
        self.pull_seconds = pull_seconds
        self._lock = threading.Lock()
        self._pulling = threading.Lock()  # one pull at a time: the cache is pruned between them
        self._engine_facts: tuple[tuple[str, str, str], dict] | None = None

    # --- the record ----------------------------------------------------------------------------
    def pulled(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, sort_keys=True))
        tmp.replace(self.path)

    def _note(self, image_id: str, *, ref: str | None = None, size: int | None = None) -> None:
        with self._lock:
            data = self.pulled()
            entry = data.get(image_id)
            if entry is None and ref is None:
                return  # not one Euler pulled: the lender's, never counted nor pruned
            entry = entry or {"refs": [], "size": 0}
            if ref is not None and ref not in entry["refs"]:
                entry["refs"].append(ref)
            if size is not None:
                entry["size"] = int(size)
            entry["used"] = time.time()
            data[image_id] = entry
            self._write(data)

    def _forget(self, image_id: str) -> None:
        with self._lock:
            data = self.pulled()
            if data.pop(image_id, None) is not None:
                self._write(data)

    # --- an assignment's image -------------------------------------------------------------------
    def ensure(self, image: str, *, trust: str = "") -> str:
        """The image's id once it may run here; RunnerError(`image_pull_failed`, fixed text) when it may not."""
        try:
            ref = imageref.parse(image)
        except imageref.InvalidReference as exc:
            raise refused(f"not a valid image reference ({exc})") from None
        patterns = self.policy.patterns
        if patterns and not imageref.allowed_by(image, patterns):
            raise refused(NOT_ALLOWED)
        local = self._local_id(image)
        if local is not None:
            if local in self.pulled():
                self._note(local)
                return local
            if trust != COMMUNITY or self.policy.local_images:
                return local
        try:
            return self._fetch(ref, image, patterns)
        except RunnerError as exc:
            if local is None:
                raise
            # On a community node a local image runs only as the registry serves it: a pull, which failed.
            raise RunnerError(exc.reason, f"{NOT_LOCAL}; pulling it from its registry failed: {exc.message}") from None

    def _fetch(self, ref: imageref.ImageRef, image: str, patterns: tuple[str, ...]) -> str:
        named = imageref.named_registries(patterns)
        why = imageref.form_refusal(ref, allowed=named)
        if why:
            raise refused(why)
        with self._pulling:
            self._pull(
                ref,
                registry.DialPolicy.of(
                    allowed=self.policy.allowed_networks, blocked=self.policy.blocked_networks, open_hosts=named
                ),
            )
            found = self._local_id(image)
            if found is None:
                raise RunnerError("image_pull_failed", LOAD_FAILED)
            size = int((self.api.inspect_image(found) or {}).get("Size") or 0)
            self._note(found, ref=image, size=size)
            self.prune(keep=found)
        return found

    def touch(self, image_id: str) -> None:
        """A job started on it: most recently used."""
        self._note(image_id)

    def runnable(self, image: str) -> str:
        """The name the engine knows the image by: the reference itself, or for a digest reference that the agent
        loaded (a load records no digest), the tag it was loaded under. A tag reference costs no engine call."""
        found = self._by_digest(image)
        return found[0] if found else image

    def _by_digest(self, image: str) -> tuple[str, str] | None:
        """For a digest reference on the engine: (the name it is known by, its id); else None."""
        try:
            ref = imageref.parse(image)
        except imageref.InvalidReference:
            return None
        if not ref.digest:
            return None
        for name in (image, loaded_tag(ref)):
            found = self._inspect(name)
            if found is not None:
                return name, found
        return None

    def _inspect(self, name: str) -> str | None:
        try:
            return str(self.api.inspect_image(name)["Id"])
        except derrors.ImageNotFound:
            return None
        except derrors.APIError as exc:
            if exc.status_code == 404:
                return None
            raise RunnerError("image_pull_failed", UNREACHABLE) from None

    def _local_id(self, image: str) -> str | None:
        found = self._by_digest(image)
        return found[1] if found else self._inspect(image)

    # --- a pull (nodeagent/registry/) ------------------------------------------------------------------------
    def _engine(self) -> tuple[tuple[str, str, str], dict]:
        """The engine's platform and registry settings, read once (an engine restart keeps them)."""
        if self._engine_facts is None:
            try:
                version, info = self.api.version(), self.api.info()
            except derrors.APIError:
                raise RunnerError("image_pull_failed", UNREACHABLE) from None
            platform = (str(version.get("Os") or "linux"), str(version.get("Arch") or "amd64"), "")
            self._engine_facts = (platform, dict(info.get("RegistryConfig") or {}))
        return self._engine_facts

    def _pull(self, ref: imageref.ImageRef, policy: registry.DialPolicy) -> None:
        deadline = time.monotonic() + self.pull_seconds
        platform, registry_config = self._engine()
        known = ref.registry in (registry_config.get("IndexConfigs") or {})
        addresses = () if known or not registry_config.get("InsecureRegistryCIDRs") else imageref.resolve(ref.host)
        try:
            registry.pull(
                self.api,
                ref,
                tag=loaded_tag(ref),
                policy=policy,
                deadline=deadline,
                max_bytes=MAX_IMAGE_BYTES,
                platform=platform,
                insecure=registry.insecure_registry(registry_config, ref, addresses),
            )
        except registry.Failed as exc:
            log.info("pull of %s failed (%s): %s", ref, exc.kind, exc.detail[:300])
            raise RunnerError("image_pull_failed", failure_text(exc.kind)) from None

    # --- the cache cap -------------------------------------------------------------------------------
    def prune(self, *, keep: str | None = None, in_use: Callable[[], set[str]] | None = None) -> list[str]:
        """Past the cap, remove Euler's least recently used images, never one a container uses (running or
        not: a job's container holds its image until removed) nor `keep`; returns the ids removed."""
        data = self.pulled()
        total = sum(int(e.get("size") or 0) for e in data.values())
        cap = self.policy.cache_bytes
        if total <= cap:
            return []
        used = (in_use or self._in_use)()
        removed = []
        for image_id, entry in sorted(data.items(), key=lambda item: item[1].get("used", 0)):
            if total <= cap:
                break
            if image_id == keep or image_id in used:
                continue
            if self._remove(image_id, entry):
                removed.append(image_id)
                total -= int(entry.get("size") or 0)
        return removed

    def _in_use(self) -> set[str]:
        return {str(c.get("ImageID") or "") for c in self.api.containers(all=True)}

    def _remove(self, image_id: str, entry: dict) -> bool:
        """Untag Euler's references (the image goes with its last tag; a lender's own tag keeps it)."""
        for ref in entry.get("refs") or []:
            name = self.runnable(ref)
            if self._inspect(name) != image_id:
                continue  # the tag moved to another image since (a later pull): not this one's to remove
            try:
                self.api.remove_image(name, force=False)
            except derrors.NotFound:
                pass
            except derrors.APIError as exc:
                log.info("could not remove image %s: %s", ref, exc.explanation or exc)
                return False
        self._forget(image_id)
        log.info("image cache: removed %s (%s)", ", ".join(entry.get("refs") or []), image_id[:19])
        return True
