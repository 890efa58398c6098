"""Images already checked for this node: (reference, trust) → (image id, pulled by Euler), so that a start skips the image policy's
engine round trips (nodeagent/images.py) while nothing about its images changed.

Kept only while the engine's event stream for images is connected: any image event (pull, tag, untag, delete,
import, load, …) empties it, and so does the stream's end (an engine restart) until it is connected again. A
check that began before an event is not kept (a generation count). Where the stream cannot be followed the cache
stays empty and every start checks the image as before.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("euler.nodeagent.imagecache")

RECONNECT_SECONDS = 0.5


class ImageCache:
    def __init__(self, api) -> None:
        self.api = api
        self._lock = threading.Lock()
        self._ids: dict[tuple[str, str], tuple[str, bool]] = {}
        self._generation = 0
        self._connected = False
        self._stream = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the start path --------------------------------------------------------------------------
    def get(self, image: str, trust: str) -> tuple[str, bool] | None:
        with self._lock:
            return self._ids.get((image, trust)) if self._connected else None

    def generation(self) -> int:
        """Taken before a check; `put` keeps its result only if no image event came meanwhile."""
        with self._lock:
            return self._generation

    def put(self, image: str, trust: str, found: tuple[str, bool], generation: int) -> None:
        with self._lock:
            if self._connected and generation == self._generation:
                self._ids[(image, trust)] = found

    def forget(self) -> None:
        with self._lock:
            self._ids.clear()
            self._generation += 1

    # --- the engine's events ---------------------------------------------------------------------
    def start(self) -> None:
        """Follow the engine's image events (once; a daemon thread)."""
        with self._lock:
            if self._thread is not None or self._stopped.is_set():
                return
            self._thread = threading.Thread(target=self._watch, daemon=True, name="euler-image-events")
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            stream, self._connected = self._stream, False
            self._ids.clear()
        if stream is not None:
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - closing a stream that already ended
                log.debug("closing the image event stream failed", exc_info=True)

    def _watch(self) -> None:
        while not self._stopped.is_set():
            try:
                stream = self.api.events(decode=True, filters={"type": ["image"]})
                with self._lock:
                    if self._stopped.is_set():
                        break
                    # Connected from now on: what changed before it is unknown, so nothing cached is kept.
                    self._stream, self._connected = stream, True
                    self._ids.clear()
                    self._generation += 1
                for _event in stream:
                    self.forget()
            except Exception as exc:  # noqa: BLE001 - the engine went away (restart): reconnect below
                log.debug("the engine's image event stream ended: %s", exc)
            with self._lock:
                self._stream, self._connected = None, False
                self._ids.clear()
                self._generation += 1
            self._stopped.wait(RECONNECT_SECONDS)
