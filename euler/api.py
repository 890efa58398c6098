"""DRF glue shared by every app: the caller's project, permissions, pagination, strict input."""

from __future__ import annotations

from rest_framework import pagination, permissions, serializers

from euler.errors import Forbidden, NotFound


def request_project(request):
    """The project the caller acts on: the API key's, or the session user's current project."""
    cached = getattr(request, "_euler_project", None)
    if cached is not None:
        return cached
    from quotas.models import ApiKey
    from quotas.selectors import session_project

    auth = getattr(request, "auth", None)
    project = None
    if isinstance(auth, ApiKey):
        project = auth.project
    elif getattr(request, "user", None) is not None and request.user.is_authenticated:
        project = session_project(request)
    request._euler_project = project
    return project


def require_owner(request) -> None:
    """Owner-only operations; an API key acts with the owner's rights of its project."""
    from quotas.models import ApiKey, Membership, Role

    if isinstance(getattr(request, "auth", None), ApiKey):
        return
    project = request_project(request)
    if not Membership.objects.filter(project=project, user=request.user, role=Role.OWNER).exists():
        raise Forbidden("Only a project owner can do this.", code="owner_required")


class HasProject(permissions.BasePermission):
    """Authenticated by API key or session, and acting within a project."""

    def has_permission(self, request, view) -> bool:
        if request.user is None or not request.user.is_authenticated:
            if request.auth is None:
                return False
        project = request_project(request)
        if project is None:
            raise NotFound("You are not a member of any project.", code="no_project")
        return True


class Pagination(pagination.PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class StrictSerializer(serializers.Serializer):
    """Rejects fields it does not know with 400 unknown_field instead of ignoring them."""

    forbidden_fields: frozenset[str] = frozenset()

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                {"non_field_errors": [serializers.ErrorDetail("Expected a JSON object.", code="invalid")]}
            )
        forbidden = sorted(set(data) & self.forbidden_fields)
        if forbidden:
            raise serializers.ValidationError(
                {
                    forbidden[0]: [
                        serializers.ErrorDetail(
                            f"{forbidden[0]!r} is a container option Euler never grants.", code="forbidden_option"
                        )
                    ]
                }
            )
        writable = {name for name, field in self.fields.items() if not field.read_only}
        unknown = sorted(set(data) - writable)
        if unknown:
            raise serializers.ValidationError(
                {unknown[0]: [serializers.ErrorDetail(f"Unknown field {unknown[0]!r}.", code="unknown_field")]}
            )
        return super().to_internal_value(data)


def paginated(serializer_class):
    """The schema of one page ({count, next, previous, results}) for APIViews that paginate by hand."""
    from drf_spectacular.utils import inline_serializer

    return inline_serializer(
        name=f"Paginated{serializer_class.__name__}List",
        fields={
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": serializer_class(many=True),
        },
    )


ERROR_STATUSES = {
    "400": "Invalid input (code names the problem: invalid, unknown_field, forbidden_option...)",
    "401": "No or an unknown API key",
    "403": "Not allowed to the caller (e.g. owner only)",
    "404": "No such object in the caller's project",
    "409": "Conflicts with the object's state",
    "429": "Rate limited or over quota (see Retry-After)",
}


def error_responses(result, generator, request, public):
    """drf-spectacular hook: every API operation documents the {code, detail} error answers it can give."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = {
        "type": "object",
        "required": ["code", "detail"],
        "properties": {
            "code": {"type": "string", "description": "stable, machine-readable"},
            "detail": {"type": "string"},
            "errors": {"type": "object", "description": "per-field messages (400 only)"},
        },
    }
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/v1/"):
            continue
        for method, operation in operations.items():
            if method == "parameters":
                continue
            responses = operation.setdefault("responses", {})
            for status_code, text in ERROR_STATUSES.items():
                responses.setdefault(status_code, {"description": text, "content": content})
    return result
