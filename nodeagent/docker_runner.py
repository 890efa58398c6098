"""The Docker side of the executor: image, create/start, logs, wait, OOM, stop, remove, list by label."""

from __future__ import annotations

import calendar
import contextlib
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import docker
import requests
from docker import errors as derrors
from docker.models.containers import _create_container_args
from urllib3.exceptions import ProtocolError

from nodeagent import protocol

STOP_GRACE_SECONDS = protocol.DEFAULT_STOP_GRACE_SECONDS  # when no grace is given


class RunnerError(Exception):
    """A Docker failure with the reason the executor reports (`image_pull_failed`, `start_failed`)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message[:2000]


class ContainerGone(Exception):
    """The container no longer exists."""


class RunnerUnavailable(Exception):
    """The Docker engine did not answer (restarting, socket closed)."""


@dataclass(frozen=True)
class ContainerState:
    container_id: str
    status: str  # created | running | exited | dead | ...
    exit_code: int | None
    oom_killed: bool
    labels: dict

    @property
    def attempt_id(self) -> int | None:
        try:
            return int(self.labels.get(protocol.LABEL_ATTEMPT, ""))
        except ValueError:
            return None

    @property
    def finished(self) -> bool:
        return self.status in {"exited", "dead"}

    @property
    def removing(self) -> bool:
        """`docker rm -f` from someone else: killed, then removed (the engine shows `removing` in between)."""
        return self.status == "removing"


def _state(attrs: dict) -> ContainerState:
    st = attrs.get("State") or {}
    status = st.get("Status", "")
    return ContainerState(
        container_id=attrs["Id"],
        status=status,
        exit_code=st.get("ExitCode") if status in {"exited", "dead", "removing"} else None,
        oom_killed=bool(st.get("OOMKilled")),
        labels=(attrs.get("Config") or {}).get("Labels") or {},
    )


class LogStream:
    """Follows a container's stdout/stderr from the start: yields (stream, bytes) in Docker's stored order."""

    def __init__(self, api, container_id: str, *, follow: bool = True, since_ns: int | None = None, stamps=False):
        params = {"stdout": 1, "stderr": 1, "follow": int(follow), "timestamps": int(stamps)}
        if since_ns is not None:
            params["since"] = f"{since_ns // 1_000_000_000}.{since_ns % 1_000_000_000:09d}"  # inclusive
        self._res = api._get(api._url("/containers/{0}/logs", container_id), params=params, stream=True)
        api._raise_for_status(self._res)
        self._sock = api._get_raw_response_socket(self._res)
        api._disable_socket_timeout(self._sock)

    def frames(self) -> Iterator[tuple[str, bytes]]:
        raw = self._res.raw
        try:
            while True:
                header = raw.read(8)
                if len(header) < 8:
                    return
                kind, length = struct.unpack(">BxxxL", header)
                data = raw.read(length) if length else b""
                if length and not data:
                    return
                yield ("stderr" if kind == 2 else "stdout"), data
        except (OSError, ValueError, AttributeError, ProtocolError):
            return  # closed under us: the reader is being shut down (a shut-down socket reads as a broken chunk)

    __iter__ = frames

    def stamped(self) -> Iterator[tuple[str, int | None, bytes]]:
        """With `stamps=True`: (stream, the engine's timestamp in ns, bytes) per frame."""
        seconds: dict[bytes, int] = {}
        for kind, data in self.frames():
            stamp, sep, rest = data.partition(b" ")
            ts = parse_stamp(stamp, seconds) if sep else None
            yield kind, ts, rest if ts is not None else data

    def close(self) -> None:
        """Wakes a reader blocked in `frames` first (shutdown): closing the response under a blocked read would
        wait for the read's lock, that is for the container's next output (an agent stopping beside a quiet,
        adopted job would hang)."""
        with contextlib.suppress(Exception):
            getattr(self._sock, "_sock", self._sock).shutdown(socket.SHUT_RDWR)  # a SocketIO wraps the socket
        with contextlib.suppress(Exception):  # closing a dead socket is not an error
            self._res.close()


class AttachStream:
    """A container's stdout/stderr as the engine hands it to an attached client: every byte, in order.

    Made before `start`, it sees the output from the first byte; the engine blocks the container's writes while
    this reader lags (its per-attach buffer holds about 1 MiB), so nothing is lost to the engine log's rotation.
    Closing it releases the container: the engine drops a closed attach and the job writes on unhindered.
    """

    def __init__(self, api, container_id: str):
        self._sock = api.attach_socket(container_id, params={"stdout": 1, "stderr": 1, "stream": 1})
        self._raw = getattr(self._sock, "_sock", self._sock)
        self._raw.settimeout(None)  # the API client's timeout must not end a quiet job's stream
        self._file = self._raw.makefile("rb")
        self._closed = False

    def frames(self) -> Iterator[tuple[str, bytes]]:
        """(stream, bytes) per frame until the container's output ends (EOF) or the stream is closed."""
        read = self._file.read
        try:
            while True:
                header = read(8)
                if len(header) < 8:
                    return
                kind, length = struct.unpack(">BxxxL", header)
                data = read(length) if length else b""
                if len(data) < length:
                    return
                if data:
                    yield ("stderr" if kind == 2 else "stdout"), data
        except (OSError, ValueError, AttributeError, ProtocolError):
            return  # closed under us: the reader is being shut down (a shut-down socket reads as a broken chunk)

    __iter__ = frames

    def close(self) -> None:
        """Idempotent; wakes a reader blocked in `frames` (shutdown, then close)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._raw.shutdown(socket.SHUT_RDWR)
        for thing in (self._file, self._sock, self._raw):
            with contextlib.suppress(Exception):
                thing.close()


def parse_stamp(stamp: bytes, cache: dict[bytes, int] | None = None) -> int | None:
    """`2026-11-30T10:52:46.123456789Z` (RFC 3339, UTC, fraction trimmed) in ns since the epoch; None if not."""
    if len(stamp) < 20 or not stamp.endswith(b"Z"):
        return None
    head, frac = stamp[:19], stamp[19:-1]
    base = cache.get(head) if cache is not None else None
    if base is None:
        try:
            base = calendar.timegm(time.strptime(head.decode("ascii"), "%Y-%m-%dT%H:%M:%S"))
        except (ValueError, UnicodeDecodeError):
            return None
        if cache is not None:
            cache.clear()  # one second at a time: the cache never grows
            cache[head] = base
    nanos = 0
    if frac:
        if not frac.startswith(b".") or not frac[1:].isdigit():
            return None
        nanos = int(frac[1:10].ljust(9, b"0"))
    return base * 1_000_000_000 + nanos


class DockerRunner:
    def __init__(self, client: docker.DockerClient | None = None):
        self.client = client or docker.from_env(timeout=120)
        if self.client.api.base_url.startswith("http+docker://"):
            # The engine's unix socket: no proxy can apply, yet requests would look for one in the environment on
            # every call (a scan of os.environ, 0.1-0.3 ms of CPU each, four to six calls on a job's start path).
            self.client.api.trust_env = False

    # --- creation (images: nodeagent/images.py) -------------------------------------------------------------
    def image_volumes(self, image: str) -> tuple[str, ...]:
        """The paths the image declares as VOLUMEs (each would get an anonymous volume), sorted."""
        try:
            config = self.client.api.inspect_image(image).get("Config") or {}
        except derrors.APIError as exc:
            raise RunnerError("start_failed", f"{image}: {exc.explanation or exc}") from None
        return tuple(sorted(str(path) for path in (config.get("Volumes") or {})))

    def create_and_start(self, kwargs: dict) -> str:
        """Create (or find, when a container of that name already exists) and start; returns the id."""
        return self.create_attach_and_start(kwargs, attach=False)[0]

    def create_attach_and_start(
        self, kwargs: dict, *, attach: bool = True, before_start: Callable[[str], None] | None = None
    ) -> tuple[str, AttachStream | None]:
        """Create (or find, when a container of that name already exists), attach, start: (id, attach stream).

        The attach is made before `start`, so it holds the job's output from the first byte. A container found
        already started (an agent that died mid-start) gets no attach: None, its log is read from the engine.
        `before_start(id)` runs between the create and the start (a RunnerError from it removes the container).
        The low-level calls skip the inspect that docker-py's high-level create makes (tens of ms).
        """
        api = self.client.api
        create = {k: v for k, v in kwargs.items() if k != "detach"}
        started = False
        try:
            args = _create_container_args({**create, "version": api._version})
            cid = api.create_container(**args)["Id"]
        except derrors.ImageNotFound as exc:
            raise RunnerError("image_pull_failed", str(exc.explanation or exc)) from None
        except derrors.APIError as exc:
            if exc.status_code != 409 or "name" not in create:
                raise RunnerError("start_failed", str(exc.explanation or exc)) from None
            existing = api.inspect_container(create["name"])
            cid, started = existing["Id"], existing["State"]["Status"] != "created"
        if started:
            return cid, None
        stream = None
        if attach:
            try:
                stream = AttachStream(api, cid)
            except (derrors.APIError, requests.exceptions.RequestException, OSError):
                stream = None  # the engine's log is then the only source, as after an agent restart
        if before_start is not None:
            try:
                before_start(cid)
            except RunnerError:
                if stream is not None:
                    stream.close()
                self.remove(cid)
                raise
        try:
            api.start(cid)
        except derrors.APIError as exc:
            if stream is not None:
                stream.close()
            self.remove(cid)
            raise RunnerError("start_failed", str(exc.explanation or exc)) from None
        return cid, stream

    # --- running containers ----------------------------------------------------------------
    def logs(self, container_id: str, *, follow: bool = True) -> LogStream:
        return LogStream(self.client.api, container_id, follow=follow)

    def stamped_logs(self, container_id: str, *, follow: bool = True, since_ns: int | None = None) -> LogStream:
        """Frames with the engine's timestamps, from `since_ns` (inclusive) when given: see LogCursor."""
        return LogStream(self.client.api, container_id, follow=follow, since_ns=since_ns, stamps=True)

    def log_rotation(self, container_id: str) -> tuple[int, int] | None:
        """The container's json-file rotation as the engine has it: (max-size bytes, max-file); None if not set."""
        try:
            config = (self.client.api.inspect_container(container_id).get("HostConfig") or {}).get("LogConfig")
        except derrors.NotFound:
            return None
        opts = (config or {}).get("Config") or {}
        if (config or {}).get("Type") != "json-file":
            return None
        try:
            return int(opts["max-size"]), int(opts.get("max-file", 1))
        except (KeyError, ValueError):
            return None  # a size with a unit (k, m, g) is not what this agent sets

    def wait(self, container_id: str) -> int:
        """Block until the container stops; its exit code as the engine recorded it."""
        try:
            return int(self.client.api.wait(container_id, timeout=None)["StatusCode"])
        except derrors.NotFound:
            raise ContainerGone(container_id) from None
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout, derrors.APIError) as exc:
            raise RunnerUnavailable(str(exc)) from None

    def oom_event(self, container_id: str, *, within: float) -> bool:
        """Whether the engine reports an `oom` event for the container: among its recent events, or one that
        arrives within `within` seconds (the stream ends then). The engine keeps its last events in memory."""
        now = time.time()
        stream = self.client.api.events(
            since=now - 120, until=now + within, filters={"container": container_id, "event": "oom"}, decode=True
        )
        try:
            for _ in stream:
                return True
            return False
        finally:
            with contextlib.suppress(Exception):
                stream.close()

    def inspect(self, container_id: str) -> ContainerState | None:
        try:
            return _state(self.client.api.inspect_container(container_id))
        except derrors.NotFound:
            return None
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            raise RunnerUnavailable(str(exc)) from None

    def stop(self, container_id: str, *, grace: int = STOP_GRACE_SECONDS) -> None:
        """SIGTERM, `grace` seconds, then SIGKILL (Docker's stop)."""
        try:
            self.client.api.stop(container_id, timeout=grace)
        except derrors.NotFound:
            pass

    def signal(self, container_id: str, sig: str) -> None:
        """Send `sig` to the container's init (which passes it to the job); nothing if it is gone or not running."""
        try:
            self.client.api.kill(container_id, signal=sig)
        except derrors.NotFound:
            pass
        except derrors.APIError as exc:
            if exc.status_code != 409:  # 409: not running (it exited meanwhile)
                raise

    def write_stop_file(self, container_id: str, word: str) -> None:
        """Put the stop reason at /run/euler/stop (protocol.STOP_FILE) in the running container."""
        from nodeagent.attempt_stop import stop_file_archive

        api = self.client.api
        try:
            if api.put_archive(container_id, "/run", stop_file_archive(word, under_run=True)):
                return
        except derrors.NotFound as exc:
            if "No such container" in str(exc):
                return
        api.put_archive(container_id, "/", stop_file_archive(word, under_run=False))  # an image without /run

    def remove(self, container_id: str) -> None:
        try:
            self.client.api.remove_container(container_id, force=True, v=True)  # v: its anonymous volumes too
        except derrors.NotFound:
            pass
        except derrors.APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise

    def list_managed(self, *, node_name: str | None = None, owner: str | None = None) -> list[ContainerState]:
        """Euler containers of this node name and/or this owner (an agent passes its owner: only its own)."""
        labels = [f"{protocol.LABEL_MANAGED}=true"]
        if node_name is not None:
            labels.append(f"{protocol.LABEL_NODE}={node_name}")
        if owner is not None:
            labels.append(f"{protocol.LABEL_OWNER}={owner}")
        found = self.client.api.containers(all=True, filters={"label": labels})
        states = []
        for c in found:
            attrs = {"Id": c["Id"], "State": {"Status": c.get("State", "")}, "Config": {"Labels": c.get("Labels")}}
            states.append(_state(attrs))
        return states

    def find_attempt(
        self, *, attempt_id: int, node_name: str | None = None, owner: str | None = None
    ) -> ContainerState | None:
        for c in self.list_managed(node_name=node_name, owner=owner):
            if c.attempt_id == attempt_id:
                return self.inspect(c.container_id)
        return None
