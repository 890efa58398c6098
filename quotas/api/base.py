"""DRF glue shared by every app: the caller's project, permissions, pagination, strict input."""

from __future__ import annotations

import copy

from rest_framework import pagination, permissions, relations, serializers

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


def request_role(request) -> str | None:
    """The role the caller acts with in its project: a key's role lowered to its creator's current role,
    or the session user's membership role; None when the caller is no member."""
    if hasattr(request, "_euler_role"):
        return request._euler_role
    from quotas.models import ApiKey, Membership

    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        role = getattr(auth, "acting_role", None)
    else:
        project = request_project(request)
        user = getattr(request, "user", None)
        role = None
        if project is not None and getattr(user, "pk", None):
            role = Membership.objects.filter(project=project, user=user).values_list("role", flat=True).first()
    request._euler_role = role
    return role


def request_user(request):
    """The human behind the call: the session user, or the user who made the API key (None for an operator's)."""
    from quotas.models import ApiKey

    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        return auth.created_by
    user = getattr(request, "user", None)
    return user if getattr(user, "pk", None) else None


def check_access(request, rule, body_fields=()) -> None:
    """Raise Forbidden (403, `<role>_required`) when the caller's role does not satisfy `rule`."""
    from quotas.access import refusal

    refused = refusal(rule, request_role(request), body_fields)
    if refused is not None:
        raise Forbidden(refused[1], code=refused[0])


def require_owner(request) -> None:
    """Owner-only, for code that decides inside a view; routes declare `access` instead (quotas/access.py)."""
    from quotas.access import owner

    check_access(request, owner())


class HasProject(permissions.BasePermission):
    """Authenticated by API key or session, acting within a project, with the role the view declares
    for the method (`access`, see quotas/access.py). A view that declares nothing is owner-only."""

    def has_permission(self, request, view) -> bool:
        from quotas.access import owner, rule_for

        if request.user is None or not request.user.is_authenticated:
            if request.auth is None:
                return False
        project = request_project(request)
        if project is None:
            raise NotFound("You are not a member of any project.", code="no_project")
        rule = rule_for(getattr(view, "access", None), request.method) or owner()
        fields = ()
        if rule.owner_fields:
            data = request.data
            fields = data.keys() if isinstance(data, dict) else ()
        check_access(request, rule, fields)
        return True


class Pagination(pagination.PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class FieldsOnce:
    """A ModelSerializer whose fields are built once per class: DRF's ModelSerializer builds each field from the
    model's metadata on every instance (~0.1 ms a field: a job with its attempts, events and dependencies is ~90
    fields, ~5 ms a response). The built, unbound fields are kept on the class and copied for each instance. Only
    for serializers whose fields depend on nothing but the class.

    A plain field is copied shallowly: binding it to the instance (Field.bind) only sets attributes of the copy
    (its name, parent, label, source), and DRF's own deep copy shares its validators anyway. A deep copy
    re-instantiates every field from its arguments: 6.0 → 4.5 ms for a job's GET (bench/api_costs.py). A field
    holding other fields bound to itself (a nested serializer, a many-related field) is deep-copied, as DRF copies
    it."""

    def get_fields(self):
        cls = type(self)
        built = cls.__dict__.get("_fields_once")
        if built is None:
            built = super().get_fields()
            cls._fields_once = built
        return {name: _copy_field(field) for name, field in built.items()}


def _copy_field(field):
    if isinstance(field, (serializers.BaseSerializer, relations.ManyRelatedField)):
        return copy.deepcopy(field)
    return copy.copy(field)


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
