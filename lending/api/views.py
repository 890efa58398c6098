"""The lenders' API: the ledger's totals (JSON or CSV), their machines, and each machine's terms."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from euler.errors import InvalidInput, NotFound
from lending import selectors
from lending.api.renderers import CsvRenderer
from lending.api.serializers import MachinesOut, TermsIn, TermsOut
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


def _lent_node_or_404(request, name: str):
    from lending.machines import lent_node

    node = lent_node(request_user(request), name)
    if node is None:
        raise NotFound("No such node among the machines you lent.")
    return node


class LendingView(APIView):
    access = {"get": member(note="the machines they lent")}

    @extend_schema(
        operation_id="lending_machines",
        responses=MachinesOut,
        summary="The caller's lent machines: state, what runs there, hours contributed per day, losses, terms",
    )
    def get(self, request):
        from lending.machines import machines

        return Response({"machines": machines(request_user(request), now=timezone.now())})


class TermsView(APIView):
    access = {
        "get": member(note="the machines they lent"),
        "put": member(note="the machines they lent"),
    }

    @extend_schema(operation_id="lending_terms_retrieve", responses=TermsOut, summary="A lent machine's terms")
    def get(self, request, name: str):
        from lending.terms import terms_dict

        return Response({"node": name, "terms": terms_dict(_lent_node_or_404(request, name))})

    @extend_schema(
        operation_id="lending_terms_set",
        request=TermsIn,
        responses=TermsOut,
        summary="Replace a lent machine's terms (windows, caps below the approved capacity, projects, hours)",
    )
    def put(self, request, name: str):
        from lending.terms import terms_dict, terms_set

        node = _lent_node_or_404(request, name)
        terms_set(node=node, data=request.data, by=request_user(request))
        node.refresh_from_db(fields=["lender_terms"])
        return Response({"node": name, "terms": terms_dict(node)})
