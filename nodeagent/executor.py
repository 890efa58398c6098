"""Runs assignments as hardened containers on this host and reports them: the daemon's Executor.

One thread per attempt drives its life: image, create/start, `running` report, log shipping, timeout
and stop requests, exit (OOM included), the `ended` report once the logs are shipped, removal. A small
JSON record per attempt in the state dir (never the env) lets a restarted agent adopt its containers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from pathlib import Path

from nodeagent import attempt_stop, protocol, state
from nodeagent.attempt_phase import Phase
from nodeagent.attempt_run import AttemptRun
from nodeagent.containers import DEFAULT_CONTAINER_LOG_BYTES, MIN_CONTAINER_LOG_BYTES
from nodeagent.disk import DiskGuard, StorageQuota, VolumeAccess, remove_volumes
from nodeagent.disk_limits import DEFAULT_MAX_INODES, DISK_FIRST_CHECK_SECONDS
from nodeagent.executor_gpus import ExecutorGpus
from nodeagent.executor_start import ExecutorStart
from nodeagent.imagecache import ImageCache
from nodeagent.images import ImageStore
from nodeagent.logship import DEFAULT_SPOOL_BYTES
from nodeagent.offer import ImagePolicy, load_image_policy
from nodeagent.outputs.spool import DEFAULT_SPOOL_BYTES as DEFAULT_OUTPUT_SPOOL_BYTES
from nodeagent.outputs.spool import OutputSpool

REAP_EVERY_SECONDS = 30.0


def env_number(name: str, default: float, minimum: float, maximum: float) -> float:
    """A number from the environment; a bad value stops the agent with a message naming the variable."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be between {minimum:g} and {maximum:g}, got {raw!r}")
    return value


class Executor(ExecutorGpus, ExecutorStart):
    def __init__(
        self,
        *,
        client,
        node_name: str,
        state_dir: Path,
        logger: logging.Logger | None = None,
        runner=None,
        stop_grace: int | None = None,
        max_spool_bytes: int | None = None,
        egress=None,
        owner: str | None = None,
        images: ImagePolicy | None = None,
        max_inodes: int | None = None,
    ):
        from nodeagent.docker_runner import DockerRunner

        self.client = client
        self.node_name = node_name
        self.state_dir = Path(state_dir)
        # Containers carry this identity; only those are adopted and reaped (see state.owner_id).
        self.owner = owner or state.owner_id(self.state_dir)
        self.log = logger or logging.getLogger("euler.nodeagent.executor")
        self.runner = runner or DockerRunner()
        # Each stop's grace comes with it (the stop command, else the assignment's stop_grace_seconds: the job's,
        # capped by the operator); this is the fallback where neither says (a stray container, an old record).
        self.stop_grace = stop_grace if stop_grace is not None else protocol.DEFAULT_STOP_GRACE_SECONDS
        self.log_flush_seconds = env_number("EULER_AGENT_LOG_FLUSH_SECONDS", 0.2, 0.01, 10)
        self.max_spool_bytes = max_spool_bytes or int(
            env_number("EULER_AGENT_LOG_SPOOL_BYTES", DEFAULT_SPOOL_BYTES, 1 << 20, 1 << 40)
        )
        # The engine's copy of each job's log is bounded on this node (json-file, rotated).
        self.container_log_bytes = int(
            env_number(
                "EULER_NODE_MAX_CONTAINER_LOG_BYTES",
                DEFAULT_CONTAINER_LOG_BYTES,
                MIN_CONTAINER_LOG_BYTES,
                1 << 40,
            )
        )
        self.records_dir = self.state_dir / "attempts"
        self.spool_dir = self.state_dir / "logs"
        self.records_dir.mkdir(parents=True, exist_ok=True)
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        # Job outputs spooled here until uploaded (nodeagent/outputs/): the lender's cap; what an agent that stopped
        # left is removed (an adopted attempt collects anew from its container).
        self.outputs = OutputSpool(
            self.state_dir / "outputs",
            int(env_number("EULER_NODE_OUTPUT_SPOOL_BYTES", DEFAULT_OUTPUT_SPOOL_BYTES, 0, 1 << 50)),
        )
        self.outputs.clear()
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._runs: dict[int, AttemptRun] = {}
        self._next_reap = time.monotonic() + REAP_EVERY_SECONDS
        self._reaping = False
        # The job network (nodeagent.egress.Egress, set up by the daemon); None: jobs get no network.
        self.egress = egress
        # The runtimes this node offers (nodeagent.runtimes.RuntimeProbe, set up by the daemon); None: the engine's
        # default only, and jobs that need a sandbox are refused.
        self.runtimes = None
        self.storage_quota = StorageQuota(self.runner.client.api, name_prefix=f"euler-{node_name}")
        self.volume_access = VolumeAccess(self.runner.client.api)
        self._disk_guards: dict[int, DiskGuard] = {}
        # Files and directories one job may create on this node (0: not limited): see nodeagent/disk.py.
        self.max_inodes = (
            max_inodes
            if max_inodes is not None
            else int(env_number("EULER_NODE_JOB_MAX_INODES", DEFAULT_MAX_INODES, 0, 1 << 40))
        )
        policy = images if images is not None else load_image_policy(os.environ)
        self.images = ImageStore(self.runner.client.api, self.state_dir, policy)
        # Images already checked here, kept while the engine's image events say nothing changed (first start).
        self.image_cache = ImageCache(self.runner.client.api)
        self.gpu_watch = None  # nodeagent.gpuwatch.GpuWatch, set by the daemon where NVML answers

    # --- the daemon's interface ------------------------------------------------------------------
    def adopt(self) -> None:
        """Take over this node's labelled containers (their attempts' records give deadlines), then reap."""
        records = {}
        for path in self.records_dir.glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                rec = json.loads(path.read_text())
                records[int(rec["attempt_id"])] = rec
        for c in self.runner.list_managed(owner=self.owner):
            attempt_id = c.attempt_id
            if attempt_id is None:
                continue
            rec = records.pop(attempt_id, None) or {
                "attempt_id": attempt_id,
                "job_id": int(c.labels.get(protocol.LABEL_JOB, "0") or 0),
            }
            rec["container_id"] = c.container_id
            self._launch(AttemptRun(self, rec, assignment=None))
            self.log.info("adopted container of attempt %s (%s)", attempt_id, c.status)
        for attempt_id in records:  # no container: never started, or removed; the server decides (lost/resend)
            self._forget_files(attempt_id)

    def running_attempts(self) -> list[protocol.RunningAttempt]:
        with self._lock:
            runs = list(self._runs.values())
        return [r.running_attempt() for r in runs]

    def serving_container(self, attempt_id: int) -> str | None:
        """The container of an attempt this agent runs, while it may take the gateway's streams (nodeagent/tunnel.py):
        running, or stopping within its grace (in-flight calls finish). None otherwise."""
        with self._lock:
            run = self._runs.get(attempt_id)
        if run is None or run.phase not in (Phase.RUNNING, Phase.STOPPING):
            return None
        return run.record.get("container_id") or None

    def container_pid(self, container_id: str) -> int | None:
        state = self.runner.client.api.inspect_container(container_id).get("State") or {}
        return int(state["Pid"]) if state.get("Running") and state.get("Pid") else None

    def handle_assignment(self, assignment: protocol.Assignment) -> None:
        with self._lock:
            if assignment.attempt_id in self._runs or self.closing.is_set():
                return
        rec = {"attempt_id": assignment.attempt_id, "job_id": assignment.job_id}
        self.log.info("assignment: attempt %s of job %s", assignment.attempt_id, assignment.job_id)
        self._launch(AttemptRun(self, rec, assignment=assignment))

    def handle_command(self, command: protocol.Command) -> None:
        if command.type != "stop_attempt":
            return
        with self._lock:
            run = self._runs.get(command.attempt_id)
        if run is not None:
            run.request_stop(command.reason or "cancelled", grace=command.grace)
            return
        self._background(self._remove_attempt_container, command.attempt_id, command.reason, command.grace)

    def tick(self) -> None:
        if self.closing.is_set() or time.monotonic() < self._next_reap:
            return
        self._next_reap = time.monotonic() + REAP_EVERY_SECONDS
        if not self._reaping:
            self._reaping = True
            self._background(self.reap)

    def close(self) -> None:
        """Stop driving attempts; containers keep running and are adopted after a restart. Once: the attempts it
        leaves stay listed (left_attempts), their readers already closed."""
        if self.closing.is_set():
            return
        self.closing.set()
        self.image_cache.stop()
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            run.close_reader()
        for run in runs:
            run.thread.join(timeout=5)

    def left_attempts(self) -> list[int]:
        """After close(): the attempts whose containers this agent leaves for its next start to adopt (those it
        had not ended), which the daemon tells the server about (protocol.Leaving)."""
        with self._lock:
            return sorted(a for a, run in self._runs.items() if run.phase not in (Phase.ENDED, Phase.DISCARDED))

    # --- what a job may use: disk (the start path: nodeagent/executor_start.py) -----------------------
    def watch_disk(self, run: AttemptRun, container_id: str, *, fresh: bool = False) -> DiskGuard | None:
        """Measure the container's writable layer and volumes while it runs (with a storage quota too: it does
        not cover volumes); past `disk_bytes` the run ends `disk_limit`. Its volumes go with the container
        (removed with `v`), after the end is reported. `fresh`: just started, first measured a moment later."""
        limit = int(run.assignment.disk_bytes) if run.assignment is not None else int(run.record.get("disk_bytes", 0))
        if limit <= 0 and self.max_inodes <= 0:
            return None
        guard = DiskGuard(
            self.runner.client.api,
            container_id,
            limit,
            run.disk_exceeded,
            max_inodes=self.max_inodes,
            first_in=DISK_FIRST_CHECK_SECONDS if fresh else 0.0,
        )
        with self._lock:
            self._disk_guards[run.attempt_id] = guard
        return guard.start()

    def unwatch_disk(self, attempt_id: int) -> None:
        """Stop measuring; once the run is over (its end reported), volumes that outlived the container go too."""
        with self._lock:
            guard = self._disk_guards.pop(attempt_id, None)
        if guard is not None:
            guard.stop()
            if guard.volumes and not self.closing.is_set():  # off this thread: the engine may hold them a moment
                threading.Thread(
                    target=remove_volumes, args=(self.runner.client.api, sorted(guard.volumes)), daemon=True
                ).start()

    def disk_used(self) -> int:
        """What running jobs wrote on this node (last measurements), added back to the free space offered."""
        with self._lock:
            return sum(g.used for g in self._disk_guards.values())

    def network_status(self) -> tuple[str, str]:
        if self.egress is None:
            return "none", ""
        return self.egress.status()

    # --- helpers ---------------------------------------------------------------------------------
    def reap(self) -> None:
        """Remove this agent's containers that no attempt here drives (strays, fenced leftovers).

        Only containers carrying this agent's owner label: another agent's, even of the same node name, are not ours.
        """
        try:
            for c in self.runner.list_managed(owner=self.owner):
                with self._lock:
                    known = c.attempt_id in self._runs
                if not known and not self.closing.is_set():
                    self.log.info("reaping stray container of attempt %s", c.attempt_id)
                    self.runner.remove(c.container_id)
            self.images.prune()  # a cap the lender lowered, images Euler pulled and then left: LRU first
        except Exception:  # noqa: BLE001 - the reaper must not take the daemon down; it runs again later
            self.log.exception("reaper pass failed")
        finally:
            self._reaping = False

    def _remove_attempt_container(self, attempt_id: int, reason: str = "", grace: int | None = None) -> None:
        found = self.runner.find_attempt(owner=self.owner, attempt_id=attempt_id)
        if found is not None:
            if not found.finished:  # the one stop path (nodeagent/attempt_stop.py), no attempt here to wait on
                attempt_stop.stop_container(
                    self.runner,
                    found.container_id,
                    reason=reason or "stale_attempt",
                    grace=attempt_stop.grace_for(command=grace, assignment=None, fallback=self.stop_grace),
                    exited=None,
                    attempt_id=attempt_id,
                )
            self.runner.remove(found.container_id)
        self._forget_files(attempt_id)

    def _background(self, fn, *args) -> None:
        threading.Thread(target=fn, args=args, daemon=True, name=f"euler-exec-{fn.__name__}").start()

    def _launch(self, run: AttemptRun) -> None:
        with self._lock:
            if run.attempt_id in self._runs:
                return
            self._runs[run.attempt_id] = run
        run.thread.start()

    def _finished(self, run: AttemptRun) -> None:
        self.unwatch_disk(run.attempt_id)
        if run.phase is Phase.LEFT:
            # The agent is closing and the container runs on for the next start: it stays listed, so that a
            # heartbeat sent while the agent stops never tells the server that this attempt is gone.
            return
        if self.gpu_watch is not None:
            self.gpu_watch.stats.forget(run.attempt_id)  # an attempt that ended without its figures (lost)
        with self._lock:
            if self._runs.get(run.attempt_id) is run:
                del self._runs[run.attempt_id]

    def _forget_files(self, attempt_id: int) -> None:
        (self.records_dir / f"{attempt_id}.json").unlink(missing_ok=True)
        (self.spool_dir / f"{attempt_id}.spool").unlink(missing_ok=True)
        (self.spool_dir / f"{attempt_id}.ack").unlink(missing_ok=True)

    def call(self, path: str, body: dict) -> dict:
        return self.client.call("POST", path, body)
