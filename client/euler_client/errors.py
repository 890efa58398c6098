"""Typed errors carrying the server's stable `code`; each kind has the exit status the CLI uses for it."""

from __future__ import annotations

# Exit statuses of the `euler` command (docs/cli.md). A job's own exit code is passed through by run/wait.
EXIT_REFUSED = 1  # the server refused the request (4xx); the message carries its code
EXIT_USAGE = 2  # bad command line: unknown flag, malformed value
EXIT_UNAVAILABLE = 69  # the server does not answer, or answered 5xx
EXIT_AUTH = 77  # no valid API key, or the key may not do this
EXIT_CONFIG = 78  # no URL or API key configured
EXIT_NO_EXIT_CODE = 125  # the job ended without an exit code (timeout, oom, lost, cancelled, ...)
EXIT_INTERRUPTED = 130  # Ctrl-C: interrupted, or `run` detached from a job left running


class EulerError(Exception):
    """Base of every error this package raises. `code` is the server's machine code when it sent one."""

    exit_code = EXIT_REFUSED

    def __init__(self, message: str, *, code: str = "error", status: int | None = None, body: dict | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.body = body or {}

    def __str__(self) -> str:
        return self.message


class ApiError(EulerError):
    """The server answered with an error status."""


class InvalidInput(ApiError):
    """400: the server refused the input (see `code` and `body["errors"]`)."""


class Unauthorized(ApiError):
    """401: missing, unknown or revoked API key."""

    exit_code = EXIT_AUTH


class Forbidden(ApiError):
    """403: the key may not do this."""

    exit_code = EXIT_AUTH


class NotFound(ApiError):
    """404: no such object in the caller's project."""


class Conflict(ApiError):
    """409: the object is not in a state that allows this (e.g. cancelling an ended job)."""


class RateLimited(ApiError):
    """429 without a quota: too many attempts; `retry_after` seconds."""

    def __init__(self, *args, retry_after: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class QuotaExceeded(RateLimited):
    """429 quota_exceeded: the project's budget for `body["resource"]` is spent."""


class ServerError(ApiError):
    """5xx: the server failed."""

    exit_code = EXIT_UNAVAILABLE


class ConnectionFailed(EulerError):
    """The server did not answer (refused, timed out, name not resolved)."""

    exit_code = EXIT_UNAVAILABLE


class ConfigError(EulerError):
    """No URL or API key to use, or an unreadable config file."""

    exit_code = EXIT_CONFIG


_BY_STATUS = {400: InvalidInput, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: InvalidInput}


def error_from_answer(status: int, body: object, headers: dict | None = None) -> ApiError:
    """The typed error for an error answer: its class from the status, its message and code from the body."""
    data = body if isinstance(body, dict) else {}
    code = str(data.get("code") or f"http_{status}")
    detail = data.get("detail") or data.get("message") or (body if isinstance(body, str) and body else "")
    message = str(detail or f"HTTP {status}")
    errors = data.get("errors")
    if isinstance(errors, dict) and errors:
        parts = []
        for field, problems in errors.items():
            text = "; ".join(str(p) for p in problems) if isinstance(problems, list) else str(problems)
            parts.append(f"{field}: {text}")
        if parts and not any(p in message for p in parts):
            message = f"{message} ({', '.join(parts)})"
    message = " ".join(message.split())  # one line, whatever the server sent
    if status == 429:
        retry_after = None
        raw = (headers or {}).get("retry-after")
        if raw and str(raw).isdigit():
            retry_after = float(raw)
        cls = QuotaExceeded if code == "quota_exceeded" else RateLimited
        return cls(message, code=code, status=status, body=data, retry_after=retry_after)
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    return cls(message, code=code, status=status, body=data)
