"""The executor's GPU side (a part of `Executor`, nodeagent/executor.py): health and figures (nodeagent/gpuwatch.py).

A GPU that turns unhealthy stops every attempt holding it (they end `gpu_error`); while an attempt runs its GPUs
are sampled, and the `ended` report carries the figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodeagent.attempt_run import AttemptRun


class ExecutorGpus:
    """Mixed into Executor: reads its `gpu_watch` (set by the daemon where NVML answers), `_lock`, `_runs`, `log`."""

    def watch_gpus(self, run: AttemptRun) -> None:
        """Sample the run's GPUs while it runs; a GPU already unhealthy stops it at once."""
        uuids, watch = run.record.get("gpu_uuids") or [], self.gpu_watch
        if watch is None or not uuids:
            return
        watch.stats.start(run.attempt_id, uuids)
        for uuid in uuids:
            reason = watch.health.reason(uuid)
            if reason:
                self.gpu_unhealthy(uuid, reason, watch.health.index.get(uuid))

    def gpu_stats(self, attempt_id: int) -> list[dict]:
        """The `ended` report's per-GPU figures ([] without GPUs or NVML)."""
        if self.gpu_watch is None:
            return []
        return [s.model_dump(mode="json") for s in self.gpu_watch.stats.finish(attempt_id)]

    def gpu_unhealthy(self, uuid: str, reason: str, index: int | None = None) -> None:
        """A GPU turned unhealthy: every attempt holding it is stopped and ends `gpu_error`, saying which and why."""
        with self._lock:
            runs = [r for r in self._runs.values() if uuid in (r.record.get("gpu_uuids") or [])]
        where = f"GPU {index} ({uuid})" if index is not None else f"GPU {uuid}"
        for run in runs:
            self.log.warning("attempt %s: stopping it, %s is unhealthy: %s", run.attempt_id, where, reason)
            run.gpu_failed(f"{where} failed: {reason}; the job was stopped and counts as lost")
