"""A base for middlewares that hold a context variable while a request is handled (sync and async, no thread hop)."""

from __future__ import annotations

import contextvars
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction


class ContextVarMiddleware:
    """Sets `var` to `enter(request)` around the rest of the chain and resets it after, in the sync or the async
    chain as Django built it; `leave(request, response)` may then add to the response."""

    sync_capable = True
    async_capable = True
    var: contextvars.ContextVar

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def enter(self, request) -> Any:
        raise NotImplementedError

    def leave(self, request, response):
        return response

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        token = self.var.set(self.enter(request))
        try:
            response = self.get_response(request)
        finally:
            self.var.reset(token)
        return self.leave(request, response)

    async def __acall__(self, request):
        token = self.var.set(self.enter(request))
        try:
            response = await self.get_response(request)
        finally:
            self.var.reset(token)
        return self.leave(request, response)
