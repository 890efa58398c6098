"""The EulerError family and the one place where errors become HTTP responses."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

log = logging.getLogger(__name__)


class EulerError(Exception):
    """A domain error with a stable machine-readable code."""

    code = "error"
    status_code = 400
    message = "Request failed."

    def __init__(self, message: str | None = None, *, code: str | None = None, extra: dict | None = None):
        self.message = message or self.message
        if code:
            self.code = code
        self.extra = extra or {}
        super().__init__(self.message)

    def as_dict(self) -> dict:
        return {"code": self.code, "detail": self.message, **self.extra}


class InvalidInput(EulerError):
    code = "invalid"
    status_code = 400


class Unauthorized(EulerError):
    code = "not_authenticated"
    status_code = 401


class Forbidden(EulerError):
    code = "forbidden"
    status_code = 403


class NotFound(EulerError):
    code = "not_found"
    status_code = 404
    message = "Not found."


class Conflict(EulerError):
    code = "conflict"
    status_code = 409


class QuotaExceeded(EulerError):
    code = "quota_exceeded"
    status_code = 429


class Unavailable(EulerError):
    code = "unavailable"
    status_code = 503


_RENAMED = {"permission_denied": "forbidden", "throttled": "rate_limited", "error": "invalid"}


def _first_message(detail) -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            inner = _first_message(value)
            return inner if key == "non_field_errors" else f"{key}: {inner}"
        return "Invalid input."
    if isinstance(detail, list):
        return _first_message(detail[0]) if detail else "Invalid input."
    return str(detail)


def _first_code(detail) -> str | None:
    if isinstance(detail, dict):
        for value in detail.values():
            return _first_code(value)
        return None
    if isinstance(detail, list):
        return _first_code(detail[0]) if detail else None
    return getattr(detail, "code", None)


def exception_handler(exc, context):
    """DRF exception handler: every error body is {"code": ..., "detail": ...}."""
    from rest_framework.views import set_rollback  # late: rest_framework.views imports our auth classes

    if isinstance(exc, EulerError):
        set_rollback()
        response = Response(exc.as_dict(), status=exc.status_code)
        after = retry_after(exc)
        if after is not None:
            response["Retry-After"] = after
        return response
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, exceptions.APIException):
        set_rollback()
        if isinstance(exc, exceptions.ValidationError):
            # A serializer may name a specific code (unknown_field, forbidden_option...).
            specific = _first_code(exc.detail)
            code = specific if specific and specific not in {"invalid", "required", "null", "blank"} else "invalid"
            body = {"code": code, "detail": _first_message(exc.detail), "errors": exc.detail}
        else:
            # DRF's own codes are stable (parse_error, not_authenticated, not_found...); a few are renamed.
            code = getattr(exc.detail, "code", None) or exc.default_code
            body = {"code": _RENAMED.get(code, code), "detail": _first_message(exc.detail)}
        response = Response(body, status=exc.status_code)
        if getattr(exc, "auth_header", None):
            response["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            response["Retry-After"] = str(int(exc.wait) + 1)
        return response
    return None


def json_error(code: str, detail: str, status_code: int, **extra) -> JsonResponse:
    return JsonResponse({"code": code, "detail": detail, **extra}, status=status_code)


def retry_after(exc: EulerError) -> str | None:
    """The Retry-After header a throttled (429) or unavailable (503) error carries, when it says how long."""
    if exc.status_code in (429, 503) and exc.extra.get("retry_after") is not None:
        return str(exc.extra["retry_after"])
    return None


def error_response(exc: EulerError) -> JsonResponse:
    """An EulerError as the JSON body every API answers with, for the views outside DRF (the node API, the log
    reader, the blocking read, the gateway)."""
    response = JsonResponse(exc.as_dict(), status=exc.status_code)
    after = retry_after(exc)
    if after is not None:
        response["Retry-After"] = after
    return response


def handler404(request, exception=None):
    if request.path.startswith(("/api/", "/node-api/")):
        return json_error("not_found", "Not found.", status.HTTP_404_NOT_FOUND)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request):
    if request.path.startswith(("/api/", "/node-api/")):
        return json_error("server_error", "Internal error; it has been logged.", 500)
    from django.views.defaults import server_error

    return server_error(request)
