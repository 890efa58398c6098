"""An attempt's record and reports (a part of `AttemptRun`, nodeagent/attempt_run.py, run by its owner thread).

The record file (`<records_dir>/<attempt>.json`, rewritten whole), the last logs shipped before the end, the
`protocol.AttemptReport`s, and the end: `ended` reported, then the record and the spool forgotten; or a fenced
attempt discarded (its container stopped and removed, nothing reported).
"""

from __future__ import annotations

import contextlib
import json
import time

from nodeagent import protocol
from nodeagent.attempt_phase import Phase
from nodeagent.attempt_report import send_report
from nodeagent.logship import Stale
from nodeagent.outputs import hooks as outputs


class AttemptRecord:
    """Mixed into AttemptRun: these read its executor (`ex`), record, shipper and phase, and call its `_move` and
    `_check_closing`."""

    def _save(self, **updates) -> None:
        if self._forgotten:
            return  # ended: its files are gone and stay gone
        path = self.ex.records_dir / f"{self.attempt_id}.json"
        tmp = path.with_suffix(".tmp")
        self.record.update(updates)
        tmp.write_text(json.dumps(self.record))
        tmp.replace(path)

    def _drain_logs(self) -> None:
        delay = 0.05
        while not self.shipper.ship(force=True):
            self._check_closing()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _send_logs(self, body: dict) -> dict:
        path = protocol.PATH_ATTEMPT_LOGS.format(attempt_id=self.attempt_id)
        return self.ex.call(path, body)

    # --- reports ----------------------------------------------------------------------------------
    def _report(self, report: protocol.AttemptReport) -> protocol.ReportReply:
        return send_report(self.ex.call, self.attempt_id, report, closing=self._check_closing, log=self.ex.log)

    def _end(self, *, reason: str, exit_code: int | None, message: str = "", **fields) -> None:
        cid = self.record.get("container_id")
        fields = fields or outputs.not_collected(self)  # declared outputs, none collected: said so
        report = protocol.AttemptReport(
            state="ended",
            reason=reason,
            exit_code=exit_code,
            message=message[:2000],
            **({"container_id": cid[:128]} if cid else {}),
            **fields,
        )
        with contextlib.suppress(Stale):
            self._report(report)
        self.ex.log.info("attempt %s ended: %s (exit %s)", self.attempt_id, reason, exit_code)
        self._move(Phase.ENDED)
        self._forget()

    def _forget(self) -> None:
        self._forgotten = True
        self.shipper.remove_files()
        self.ex._forget_files(self.attempt_id)

    def _discard(self) -> None:
        self._move(Phase.DISCARDED)
        self.stop_asked.set()  # a reader waiting for room lets go: the engine cannot stop an unread attach
        cid = self.record.get("container_id")
        if cid:
            self._stop_container(cid, "stale_attempt")  # the one stop path: its reason, its grace (attempt_stop)
            self.ex.runner.remove(cid)
        self._forget()
