"""The context-variable middleware shell behind the request id and the audit context, in both of Django's chains."""

import asyncio

from django.http import HttpResponse
from django.test import RequestFactory

from audit import context
from audit.context import AuditContextMiddleware
from euler.observability import RequestIdMiddleware, request_id_var


def seen_during(middleware_class, *, is_async: bool, **meta):
    """(what the view saw: request id and audit caller ip, the response, the values after)."""
    seen = {}

    def view(request):
        seen["id"] = request_id_var.get()
        caller = context._caller.get()
        seen["ip"] = caller.ip if caller else None
        return HttpResponse("ok")

    async def async_view(request):
        return view(request)

    middleware = middleware_class(async_view if is_async else view)
    request = RequestFactory().get("/", **meta)
    response = asyncio.run(middleware(request)) if is_async else middleware(request)
    return seen, response, (request_id_var.get(), context._caller.get())


def test_the_request_id_is_set_while_the_request_is_handled_echoed_and_reset_after_in_both_chains():
    for is_async in (False, True):
        seen, response, after = seen_during(RequestIdMiddleware, is_async=is_async, HTTP_X_REQUEST_ID="rid-7")
        assert seen["id"] == "rid-7" and response["X-Request-ID"] == "rid-7"
        assert after == ("", None)


def test_the_audit_caller_holds_the_request_while_it_is_handled_and_is_reset_after_in_both_chains():
    for is_async in (False, True):
        seen, response, after = seen_during(AuditContextMiddleware, is_async=is_async, REMOTE_ADDR="203.0.113.9")
        assert seen["ip"] == "203.0.113.9" and "X-Request-ID" not in response
        assert after == ("", None)
