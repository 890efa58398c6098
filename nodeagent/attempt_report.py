"""Sending one attempt's report (`protocol.AttemptReport`, validated when built) until the control plane answers."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from nodeagent import protocol
from nodeagent.client import Refused, Unreachable
from nodeagent.logship import Stale


def send_report(
    call: Callable[[str, dict], dict],
    attempt_id: int,
    report: protocol.AttemptReport,
    *,
    closing: Callable[[], None],
    log: logging.Logger,
) -> protocol.ReportReply:
    """Send a report until the server answers; a fenced answer raises Stale. `closing()` raises when the agent
    closes (checked before each try). Only the fields the report was built with are sent."""
    path = protocol.PATH_ATTEMPT_REPORT.format(attempt_id=attempt_id)
    body = report.model_dump(mode="json", exclude_unset=True)
    delay = 0.1
    while True:
        closing()
        try:
            reply = protocol.ReportReply.model_validate(call(path, body))
        except Unreachable:
            time.sleep(delay)
            delay = min(delay * 2, 3.0)
            continue
        except Refused as exc:
            if exc.status == 409:
                raise Stale(exc.code) from None
            log.warning("attempt %s: report refused: %s %s", attempt_id, exc.status, exc.code)
            return protocol.ReportReply(accepted=False)
        if reply.stop:
            raise Stale("stop")
        return reply
