from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.services import get_agent
from euler.errors import InvalidInput
from gateway.stats import WINDOWS, agent_stats
from quotas.access import member
from quotas.api.base import request_project


class AgentStatsView(APIView):
    access = {"get": member()}

    @extend_schema(
        parameters=[OpenApiParameter("window", str, enum=list(WINDOWS), default="1h")],
        responses=OpenApiTypes.OBJECT,
        summary="Invocation figures of an agent: calls, success rate, latency percentiles",
    )
    def get(self, request, name: str):
        window = request.query_params.get("window", "1h")
        if window not in WINDOWS:
            raise InvalidInput(f"window must be one of {', '.join(WINDOWS)}.", code="invalid_window")
        agent = get_agent(project=request_project(request), name=name)
        return Response(agent_stats(agent=agent, window=window, now=timezone.now()))
