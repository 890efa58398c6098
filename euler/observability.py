"""Request ids and structured JSON logs.

Every HTTP request gets an id (the client's `X-Request-ID` when sane, else a new one), echoed in
the response and attached to each log record written while the request is handled. The response also says how
long the web process took over it (`Server-Timing: app;dur=<ms>`), so that a client behind a proxy can tell the
process's share of a request from the front's (TLS, the proxy, the queue before Django).
"""

from __future__ import annotations

import contextvars
import json
import logging
import random
import re
import time
from datetime import UTC, datetime

from euler.middleware import ContextVarMiddleware

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("euler_request_id", default="")
_SANE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def new_request_id(incoming: str | None) -> str:
    if incoming and _SANE.match(incoming):
        return incoming
    # Not a secret, so not os.urandom: that system call lets go of the GIL on the event loop's thread, and
    # with busy worker threads getting it back cost ~1 ms a request (the largest item in a profiled web
    # process under 1,500 simulated nodes).
    return f"{random.getrandbits(128):032x}"


class RequestIdMiddleware(ContextVarMiddleware):
    """Sets the request id for the request's context and echoes it in the response."""

    var = request_id_var

    def enter(self, request) -> str:
        request.request_id = new_request_id(request.META.get("HTTP_X_REQUEST_ID"))
        request.arrived = time.perf_counter()
        return request.request_id

    def leave(self, request, response):
        response["X-Request-ID"] = request.request_id
        if not response.streaming:  # a stream's headers leave before its body: no whole duration to say
            response["Server-Timing"] = f"app;dur={(time.perf_counter() - request.arrived) * 1000:.1f}"
        return response


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "request_id"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, and any `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        body = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", "")
        if rid:
            body["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                body[key] = value if isinstance(value, str | int | float | bool | type(None)) else str(value)
        if record.exc_info:
            body["exc"] = self.formatException(record.exc_info)
        return json.dumps(body, ensure_ascii=False)
