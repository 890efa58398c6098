"""GET /api/v1/audit: the caller's project's audit trail (owners and API keys)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.views import APIView

from audit import selectors
from audit.api.serializers import AuditEventOut, AuditQueryIn
from quotas.access import owner
from quotas.api.base import Pagination, paginated, request_project


class AuditListView(APIView):
    access = {"get": owner()}

    @extend_schema(
        operation_id="audit_list",
        parameters=[
            OpenApiParameter("action", str, description="one action, or a family ending in a dot (`node.`)"),
            OpenApiParameter("since", str, description="ISO 8601 instant; events at or after it"),
            OpenApiParameter("until", str, description="ISO 8601 instant; events before it"),
        ],
        responses=paginated(AuditEventOut),
        summary="The project's audit trail, newest first (owner only)",
    )
    def get(self, request):
        query = AuditQueryIn(data={k: v for k, v in request.query_params.items() if k in ("action", "since", "until")})
        query.is_valid(raise_exception=True)
        events = selectors.events_of(request_project(request), **query.validated_data)
        paginator = Pagination()
        page = paginator.paginate_queryset(events, request, view=self)
        return paginator.get_paginated_response(AuditEventOut(page, many=True).data)
