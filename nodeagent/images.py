"""The images jobs run on this node: the image policy before any pull, pulls whose failures reach the user as
fixed text, and the record of what Euler pulled here (the state dir's `images.json`), which the cache cap
prunes least recently used first.

Order of checks for an assignment's image: a valid reference (nodeagent/imageref.py); one the lender's
EULER_NODE_ALLOWED_IMAGES allows; already on the engine and runnable here (pulled by Euler, or on a node that
is not `community`, or the lender allows local images), else pulled: the registry's host is checked again
(IP literal, local-only name, resolving to an address that is not public: refused with no connection made)
and then the engine pulls it. The engine's own words never reach the user: they may carry what it found on
the lender's network.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import requests
from docker import errors as derrors

from nodeagent import imageref
from nodeagent.docker_runner import RunnerError
from nodeagent.offer import ImagePolicy

log = logging.getLogger("euler.nodeagent.images")

PULL_SECONDS = 900.0  # a pull that takes longer ends `image_pull_failed`, timed out
COMMUNITY = "community"

NOT_FOUND = "image not found: the registry has no such repository, tag or digest (or it is private)"
UNAUTHORIZED = "image pull unauthorized: the registry asks for credentials or denies access (only public images)"
TIMED_OUT = "image pull timed out"
UNREACHABLE = "image pull failed: the registry could not be reached or answered with an error"
REFUSED = "image refused by policy: {why}"
NOT_LOCAL = (
    "the image is on this node but Euler did not pull it for a job, and this community node's lender does not "
    "allow local images (EULER_NODE_LOCAL_IMAGES)"
)
NOT_ALLOWED = "this node's lender does not allow the image (EULER_NODE_ALLOWED_IMAGES)"


def pull_failure(status: int | None, text: str) -> str:
    """Pure: the fixed text for an engine's pull error (its status and words, which are never shown)."""
    words = (text or "").lower()
    if "timeout" in words or "timed out" in words or "deadline exceeded" in words:
        return TIMED_OUT
    if any(w in words for w in ("no such host", "dial tcp", "connection refused", "network is unreachable")):
        return UNREACHABLE
    if status == 404 or any(w in words for w in ("not found", "manifest unknown", "does not exist", "name unknown")):
        return NOT_FOUND
    if status in (401, 403) or any(w in words for w in ("unauthorized", "denied", "authentication required")):
        return UNAUTHORIZED
    return UNREACHABLE


def refused(why: str) -> RunnerError:
    return RunnerError("image_pull_failed", REFUSED.format(why=why))


class ImageStore:
    """What Euler pulled on this node: {image id: {"refs": [...], "used": unix time, "size": bytes}}."""

    def __init__(self, api, state_dir: Path, policy: ImagePolicy | None = None, *, pull_seconds: float = PULL_SECONDS):
        self.api = api
        self.path = Path(state_dir) / "images.json"
        self.policy = policy or ImagePolicy()
        self.pull_seconds = pull_seconds
        self._lock = threading.Lock()
        self._pulling = threading.Lock()  # one pull at a time: the cache is pruned between them

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
        why = imageref.check(ref, allowed=imageref.named_registries(patterns), unresolved_ok=False)
        if why:
            raise refused(why)
        with self._pulling:
            self._pull(ref)
            found = self._local_id(image)
            if found is None:
                raise RunnerError("image_pull_failed", NOT_FOUND)
            size = int((self.api.inspect_image(found) or {}).get("Size") or 0)
            self._note(found, ref=image, size=size)
            self.prune(keep=found)
        return found

    def touch(self, image_id: str) -> None:
        """A job started on it: most recently used."""
        self._note(image_id)

    def _local_id(self, image: str) -> str | None:
        try:
            return str(self.api.inspect_image(image)["Id"])
        except derrors.ImageNotFound:
            return None
        except derrors.APIError as exc:
            if exc.status_code == 404:
                return None
            raise RunnerError("image_pull_failed", UNREACHABLE) from None

    def _pull(self, ref: imageref.ImageRef) -> None:
        deadline = time.monotonic() + self.pull_seconds
        tag = ref.digest or ref.pull_tag
        try:
            for event in self.api.pull(ref.name, tag=tag, stream=True, decode=True):
                if isinstance(event, dict) and (event.get("error") or event.get("errorDetail")):
                    detail = event.get("errorDetail") or {}
                    log.info("pull of %s failed: %s", ref, str(event.get("error") or detail)[:300])
                    code = detail.get("code") if isinstance(detail, dict) else None
                    raise RunnerError("image_pull_failed", pull_failure(code, str(event.get("error") or detail)))
                if time.monotonic() > deadline:
                    raise RunnerError("image_pull_failed", TIMED_OUT)
        except derrors.APIError as exc:
            log.info("pull of %s failed: %s", ref, str(exc.explanation or exc)[:300])
            raise RunnerError("image_pull_failed", pull_failure(exc.status_code, str(exc.explanation or exc))) from None
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError):
            raise RunnerError("image_pull_failed", TIMED_OUT) from None

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
            if self._local_id(ref) != image_id:
                continue  # the tag moved to another image since (a later pull): not this one's to remove
            try:
                self.api.remove_image(ref, force=False)
            except derrors.NotFound:
                pass
            except derrors.APIError as exc:
                log.info("could not remove image %s: %s", ref, exc.explanation or exc)
                return False
        self._forget(image_id)
        log.info("image cache: removed %s (%s)", ", ".join(entry.get("refs") or []), image_id[:19])
        return True
