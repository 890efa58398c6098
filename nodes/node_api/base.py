"""NodeAPIView: the base of every node-agent endpoint (own auth, the HTTPS rule, protocol parsing)."""

from __future__ import annotations

import copy
import json

import pydantic
from django.conf import settings
from rest_framework import authentication, exceptions, permissions
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from euler.errors import Forbidden, InvalidInput
from euler.ratelimit import client_ip
from nodes import quickbeat
from nodes.auth import NodeRejected, address_allowed, authenticate_node, bearer  # noqa: F401 - NodeRejected re-exported


class NodeUser:
    """The caller behind a node credential: authenticated for the node endpoints only."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    is_active = True
    pk = None
    id = None

    def __init__(self, node) -> None:
        self.node = node

    def __str__(self) -> str:
        return f"node:{self.node.name}"


class NodeCredentialAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        raw = bearer(request.META.get("HTTP_AUTHORIZATION"))
        # Reports and log chunks from a node this process has cached (and whose row changes it hears of)
        # authenticate without the database, as heartbeats and polls do.
        node = quickbeat.known_node(raw, quickbeat.serving_loop())
        if node is not None:
            node = copy.copy(node)
        else:
            node = authenticate_node(raw, who=client_ip(request))
        return NodeUser(node), node

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="euler-node"'


class IsNode(permissions.BasePermission):
    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, NodeUser)


def https_ok(request) -> bool:
    """Node endpoints refuse plain HTTP unless the client is in EULER_NODE_HTTP_ALLOWED_NETWORKS."""
    if request.is_secure():
        return True
    return address_allowed(request.META.get("REMOTE_ADDR"), tuple(settings.EULER_NODE_HTTP_ALLOWED_NETWORKS))


def check_https(request) -> None:
    if not https_ok(request):
        raise Forbidden("Node endpoints require HTTPS.", code="https_required")


class NodeAPIView(APIView):
    """Authenticates `Authorization: Bearer euler_node_…` (sets `request.node`), enforces HTTPS, parses bodies."""

    authentication_classes = [NodeCredentialAuthentication]
    permission_classes = [IsNode]
    parser_classes = [JSONParser]
    renderer_classes = [JSONRenderer]
    throttle_classes: list = []
    schema = None  # the node protocol is nodeagent/protocol.py, not part of the public OpenAPI schema

    @classmethod
    def as_view(cls, **initkwargs):
        from nodes.asyncdb import pooled_view

        return pooled_view(super().as_view(**initkwargs))

    def initial(self, request, *args, **kwargs):
        check_https(request)  # before authentication: never look at a credential sent in clear
        super().initial(request, *args, **kwargs)
        request.node = request.auth

    def parse(self, request, model: type[pydantic.BaseModel], *, code: str = "invalid_request"):
        """The request body validated by a protocol model; 400 with `code` when it does not fit."""
        try:
            data = request.data
        except exceptions.ParseError as exc:
            raise InvalidInput(f"The body is not valid JSON: {exc.detail}", code=code) from None
        if not isinstance(data, dict):
            raise InvalidInput("The body must be a JSON object.", code=code)
        try:
            return model.model_validate(data)
        except pydantic.ValidationError as exc:
            raise InvalidInput(_describe(exc), code=code, extra={"errors": _errors(exc)}) from None


def _describe(exc: pydantic.ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return f"{where}: {first['msg']}"


def _errors(exc: pydantic.ValidationError) -> list[dict]:
    return json.loads(exc.json(include_url=False, include_input=False))
