"""Schedule and webhook endpoints: they parse and present; workflows.schedules and workflows.webhooks decide."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from euler.errors import Forbidden
from jobs.api.serializers import JobCreateSerializer
from quotas import roles, scoped
from quotas.access import member, owner
from quotas.api.base import Pagination, paginated, request_project, request_role, request_user
from workflows import schedules, webhooks
from workflows.api.serializers import (
    DeliveryOut,
    ScheduleIn,
    ScheduleOut,
    SchedulePatchIn,
    ScheduleRunOut,
    WebhookCreatedOut,
    WebhookIn,
    WebhookOut,
)
from workflows.models import Delivery, Schedule

# As Nomad lets whoever may submit jobs register a periodic one: members create schedules. A schedule keeps
# submitting as its creator, so changing or deleting someone else's is for owners.
OWN_ONLY = "only schedules they created"


def _job_spec(data) -> dict:
    body = JobCreateSerializer(data=data)
    body.is_valid(raise_exception=True)
    return dict(body.validated_data)


def _may_change(request, schedule: Schedule) -> None:
    if roles.allows(request_role(request), roles.OWNER):
        return
    user = request_user(request)
    if user is None or schedule.created_by_id != user.pk:
        raise Forbidden("Members change and delete only the schedules they created.", code="owner_required")


class ScheduleListView(APIView):
    access = {"get": member(), "post": member()}

    @extend_schema(operation_id="schedules_list", responses=paginated(ScheduleOut), summary="The project's schedules")
    def get(self, request):
        paginator = Pagination()
        rows = Schedule.objects.filter(project=request_project(request)).select_related("created_by")
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(ScheduleOut(page, many=True).data)

    @extend_schema(request=ScheduleIn, responses={201: ScheduleOut}, summary="Create a schedule (cron + job)")
    def post(self, request):
        data = ScheduleIn(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        spec = _job_spec(fields.pop("job"))
        schedule = schedules.schedule_create(
            project=request_project(request), fields=fields, spec=spec, by=request_user(request)
        )
        return Response(ScheduleOut(schedule).data, status=status.HTTP_201_CREATED)


class ScheduleDetailView(APIView):
    access = {"get": member(), "patch": member(note=OWN_ONLY), "delete": member(note=OWN_ONLY)}

    @extend_schema(responses=ScheduleOut, summary="One schedule")
    def get(self, request, name: str):
        return Response(ScheduleOut(schedules.get_schedule(project=request_project(request), name=name)).data)

    @extend_schema(request=SchedulePatchIn, responses=ScheduleOut, summary="Change, enable or disable a schedule")
    def patch(self, request, name: str):
        schedule = schedules.get_schedule(project=request_project(request), name=name)
        _may_change(request, schedule)
        data = SchedulePatchIn(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        spec = _job_spec(fields.pop("job")) if "job" in fields else None
        schedule = schedules.schedule_update(schedule=schedule, fields=fields, spec=spec, by=request_user(request))
        return Response(ScheduleOut(schedule).data)

    @extend_schema(responses={204: None}, summary="Delete a schedule (its jobs stay)")
    def delete(self, request, name: str):
        schedule = schedules.get_schedule(project=request_project(request), name=name)
        _may_change(request, schedule)
        schedules.schedule_delete(schedule=schedule, by=request_user(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ScheduleRunsView(APIView):
    access = {"get": member()}

    @extend_schema(operation_id="schedule_runs", responses=paginated(ScheduleRunOut), summary="A schedule's runs")
    def get(self, request, name: str):
        schedule = schedules.get_schedule(project=request_project(request), name=name)
        paginator = Pagination()
        page = paginator.paginate_queryset(schedule.runs.all(), request, view=self)
        return paginator.get_paginated_response(ScheduleRunOut(page, many=True).data)


# Webhooks carry a secret and choose where the project's events go: owners only, reading included (their URLs
# may hold tokens, as Slack's do).
class WebhookListView(APIView):
    access = {"get": owner(), "post": owner()}

    @extend_schema(operation_id="webhooks_list", responses=paginated(WebhookOut), summary="The project's webhooks")
    def get(self, request):
        paginator = Pagination()
        rows = request_project(request).webhooks.order_by("id")
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(WebhookOut(page, many=True).data)

    @extend_schema(request=WebhookIn, responses={201: WebhookCreatedOut}, summary="Register a webhook")
    def post(self, request):
        data = WebhookIn(data=request.data)
        data.is_valid(raise_exception=True)
        hook, secret = webhooks.webhook_create(
            project=request_project(request),
            url=data.validated_data["url"],
            event_names=data.validated_data["events"],
            description=data.validated_data["description"],
            by=request_user(request),
        )
        body = {**WebhookOut(hook).data, "secret": secret}
        return Response(body, status=status.HTTP_201_CREATED)


class WebhookDetailView(APIView):
    access = {"get": owner(), "delete": owner()}

    @extend_schema(responses=WebhookOut, summary="One webhook")
    def get(self, request, hook_id: int):
        return Response(WebhookOut(webhooks.get_hook(project=request_project(request), hook_id=hook_id)).data)

    @extend_schema(responses={204: None}, summary="Delete a webhook and its delivery log")
    def delete(self, request, hook_id: int):
        hook = webhooks.get_hook(project=request_project(request), hook_id=hook_id)
        webhooks.webhook_delete(hook=hook, by=request_user(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveryListView(APIView):
    access = {"get": owner()}

    @extend_schema(operation_id="webhook_deliveries", responses=paginated(DeliveryOut), summary="A hook's delivery log")
    def get(self, request, hook_id: int):
        hook = webhooks.get_hook(project=request_project(request), hook_id=hook_id)
        paginator = Pagination()
        rows = Delivery.objects.filter(hook=hook).prefetch_related("tries").order_by("-id")
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(DeliveryOut(page, many=True).data)


class RedeliverView(APIView):
    access = {"post": owner()}

    @extend_schema(request=None, responses={202: DeliveryOut}, summary="Send a delivery's payload again")
    def post(self, request, hook_id: int, delivery_id: int):
        hook = webhooks.get_hook(project=request_project(request), hook_id=hook_id)
        original = webhooks.get_delivery(hook=hook, delivery_id=delivery_id)
        copy = webhooks.redeliver(delivery=original, by=request_user(request))
        copy = scoped.deliveries(project=hook.project_id).prefetch_related("tries").get(pk=copy.pk)
        return Response(DeliveryOut(copy).data, status=status.HTTP_202_ACCEPTED)
