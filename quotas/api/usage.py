"""GET /api/v1/usage: the project's ledger, grouped by day, agent or resource."""

from datetime import date, timedelta

from django.db.models import Sum
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from euler.errors import InvalidInput
from quotas.access import member
from quotas.api.base import request_project
from quotas.api.serializers import FairShareOut
from quotas.models import UsageEntry
from quotas.selectors import fair_share

MAX_RANGE_DAYS = 400


class UsageRowOut(serializers.Serializer):
    day = serializers.DateField(required=False)
    agent = serializers.CharField(required=False)
    resource = serializers.CharField()
    amount = serializers.FloatField()


class UsageOut(serializers.Serializer):
    start = serializers.DateField(source="from")
    end = serializers.DateField(source="to")
    group_by = serializers.CharField()
    rows = UsageRowOut(many=True)
    weight = serializers.FloatField()
    fair_share = FairShareOut()


def _day(value: str | None, name: str, default: date) -> date:
    if not value:
        return default
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{name} must be a date like 2026-11-01.", code="invalid_date") from None


class UsageView(APIView):
    access = {"get": member()}

    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, description="first day, YYYY-MM-DD (default: 30 days ago)"),
            OpenApiParameter("to", str, description="last day, inclusive (default: today)"),
            OpenApiParameter("group_by", str, enum=["day", "agent", "resource"]),
        ],
        responses=UsageOut,
        summary="Usage from the ledger, grouped by day, agent or resource",
    )
    def get(self, request):
        today = timezone.now().date()
        end = _day(request.query_params.get("to"), "to", today)
        start = _day(request.query_params.get("from"), "from", end - timedelta(days=30))
        if start > end:
            raise InvalidInput("from must not be after to.", code="invalid_range")
        if (end - start).days > MAX_RANGE_DAYS:
            raise InvalidInput(f"A range is at most {MAX_RANGE_DAYS} days.", code="invalid_range")
        group_by = request.query_params.get("group_by", "day")
        columns = {"day": ["day", "resource"], "agent": ["agent_name", "resource"], "resource": ["resource"]}
        if group_by not in columns:
            raise InvalidInput("group_by is one of day, agent, resource.", code="invalid_group_by")
        rows = (
            UsageEntry.objects.filter(project=request_project(request), day__gte=start, day__lte=end)
            .values(*columns[group_by])
            .annotate(amount=Sum("amount"))
            .order_by(*columns[group_by])
        )
        out = []
        for row in rows:
            item = {"resource": row["resource"], "amount": row["amount"]}
            if "day" in row:
                item["day"] = row["day"]
            if "agent_name" in row:
                item["agent"] = row["agent_name"]
            out.append(item)
        project = request_project(request)
        body = {"from": start, "to": end, "group_by": group_by, "rows": out}
        body.update(weight=project.weight, fair_share=fair_share(project))
        return Response(UsageOut(body).data)
