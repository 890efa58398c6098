"""The lenders' API: the ledger's totals (JSON or CSV)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from euler.errors import InvalidInput
from lending import selectors
from lending.api.renderers import CsvRenderer
from quotas.access import member
from quotas.api.base import request_user


def _staff(request) -> bool:
    return bool(getattr(request_user(request), "is_staff", False))


def _member_projects(user) -> set[int]:
    from quotas.models import Membership

    return set(Membership.objects.filter(user=user).values_list("project_id", flat=True)) if user else set()


class LedgerView(APIView):
    access = {"get": member(note="the machines they lent; staff: all")}
    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(
        operation_id="ledger_totals",
        parameters=[
            OpenApiParameter(
                "group_by", str, enum=list(selectors.GROUPS), description="lender (default), node, project"
            ),
            OpenApiParameter("month", str, description="YYYY-MM: only entries that ended in that UTC month"),
            OpenApiParameter("period", str, enum=list(selectors.PERIODS), description="month (default) or day"),
            OpenApiParameter("format", str, enum=["json", "csv"]),
        ],
        summary="Totals of what lent machines ran: per lender, node or project, per month or day",
    )
    def get(self, request):
        group_by = request.query_params.get("group_by", "lender")
        period = request.query_params.get("period", "month")
        month = request.query_params.get("month") or None
        if group_by not in selectors.GROUPS:
            raise InvalidInput("group_by is lender, node or project.", code="invalid_group_by")
        if period not in selectors.PERIODS:
            raise InvalidInput("period is month or day.", code="invalid_period")
        if month:
            try:
                selectors.month_range(month)
            except ValueError:
                raise InvalidInput("month is YYYY-MM.", code="invalid_month") from None
        user, staff = request_user(request), _staff(request)
        qs = selectors.entries_for(user=user, staff=staff)
        named = None if staff else _member_projects(user)
        rows = selectors.totals(qs, group_by=group_by, period=period, month=month, named_projects=named)
        return Response({"group_by": group_by, "period": period, "month": month, "rows": rows})
