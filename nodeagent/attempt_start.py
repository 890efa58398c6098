"""A fresh attempt's start (a part of `AttemptRun`, nodeagent/attempt_run.py, run by its owner thread): the checks,
the image, the spec, create (and attach), the checks begun beside the create, the hooks, start.

What can be is kept off the path (nodeagent/executor_start.py): the runtime choice reads what the probe offers,
an image checked here before is not checked again while the engine's image events say nothing changed, and a
networked job's egress rules are verified in a thread begun before the create and waited for before the start.
"""

from __future__ import annotations

import time

from nodeagent import checkpoint
from nodeagent.attempt_phase import Phase
from nodeagent.docker_runner import RunnerError
from nodeagent.outputs import hooks as outputs


class AttemptStart:
    """Mixed into AttemptRun: reads its executor (`ex`), assignment, record and spans; calls its `_move`, `_save`,
    `_take_signals`, `_end` and hooks (`_before_create`, `_before_start`)."""

    def _start(self) -> bool:
        """Image, create, start, `running` report; False when the attempt ended before running."""
        a = self.assignment
        self._move(Phase.STARTING)
        # Everything a restarted agent needs to finish this attempt as this one would is in the record before it
        # is first saved: an agent killed between this save and the next adopts the container with it (outputs to
        # collect, the disk to guard, the GPUs to watch, a deadline), never a bare record that collects nothing.
        self.record["disk_bytes"] = a.disk_bytes
        outputs.remember(self)
        checkpoint.remember(self)
        self.record["gpu_uuids"] = list(a.gpu_uuids)
        # How it stops (nodeagent/attempt_stop.py), for an agent that adopts it: its grace and timeout warning.
        self.record["stop_grace"] = a.stop_grace_seconds
        self.record["warn_before"] = a.warn_before_timeout_seconds
        self.record["warn_signal"] = a.warn_signal
        self.record["deadline"] = time.time() + a.timeout_seconds  # made exact once the container has started
        self._save()
        self._take_signals()
        if self.stop_reason is not None:
            self._end(reason=self.stop_reason, exit_code=None, message="stopped before start")
            return False
        refused = self.ex.refuse_reason(a) or self._before_create()  # the egress rules: beside the create
        self.spans.mark("checks")
        if refused:
            self._end(reason="start_failed", exit_code=None, message=refused)
            return False
        try:
            for again in (False, True):
                checked = self.ex.start_checks(a)  # they run beside the create (nodeagent/executor_start.py)
                self.ex.ensure_image(a)
                self.spans.mark("image")
                # A container of this attempt's name left by an agent that died mid-start is found, not duplicated.
                # Attached before the start: the job's output is read from the first byte, with backpressure.
                spec = self.ex.container_spec(a)
                self.record["runtime"] = self.ex.runtime_name(spec)
                self.spans.mark("spec")
                try:
                    cid, self._attach = self._create_and_start(spec, checked)
                    break
                except RunnerError:
                    if again or self._made:
                        raise
                    # The create failed before any check was waited for: an image removed since it was checked
                    # here, or a job network a check is putting back. Once more, with everything checked afresh.
                    checked(spec)
                    self.ex.image_cache.forget()
            self.spans.mark("started")
        except RunnerError as exc:
            self.ex.log.info("attempt %s: %s", self.attempt_id, exc.reason)
            self._end(reason=exc.reason, exit_code=None, message=exc.message)
            return False
        self.record["container_id"] = cid
        self.record["deadline"] = time.time() + a.timeout_seconds
        self._save()
        return True

    def _create_and_start(self, spec: dict, checked) -> tuple[str, object]:
        """Create (and attach), then, before the start, the checks begun beside the create (`checked(spec)`: the
        egress rules) and the hooks. RunnerError `start_failed` when a check refuses (the container is removed);
        `self._made` says whether the create itself succeeded."""

        def created(cid: str) -> None:
            self._made = True
            self.spans.mark("created")  # and attached
            why = checked(spec)
            self.spans.mark("checked")
            if why:
                raise RunnerError("start_failed", why)
            self._before_start(cid)
            self.spans.mark("hooks")

        self._made = False
        return self.ex.runner.create_attach_and_start(spec, before_start=created)
