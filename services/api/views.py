"""Service endpoints: they parse and present; services.writes decides."""

from __future__ import annotations

from django.db.models import Prefetch
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from euler.errors import InvalidInput
from jobs import logstore
from quotas import scoped
from quotas.access import member
from quotas.api.base import Pagination, paginated, request_project
from services import writes
from services.api.serializers import ScaleIn, ServiceOut, ServiceSpecIn
from services.models import Replica, ServiceRevision

LOG_TAIL_BYTES = 64 * 1024  # of each replica's log in GET /services/{name}/logs


def _user(request):
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated and user.pk else None


def _services(request):
    return (
        scoped.services(project=request_project(request))
        .filter(deleting=False)
        .prefetch_related(Prefetch("replica_set", queryset=Replica.objects.select_related("instance").order_by("id")))
    )


def _out(rows, many=False):
    rows_list = list(rows) if many else [rows]
    revisions = {
        (r.service_id, r.number): r
        for r in ServiceRevision.objects.filter(service__in=[s.pk for s in rows_list])
        if any(s.pk == r.service_id and s.revision == r.number for s in rows_list)
    }
    context = {"revisions": {s.pk: revisions.get((s.pk, s.revision)) for s in rows_list}}
    return ServiceOut(rows_list if many else rows, many=many, context=context).data


def _one(request, name):
    service = writes.get_service(project=request_project(request), name=name)
    return _services(request).get(pk=service.pk)


class ServiceListView(APIView):
    access = {"get": member(), "post": member()}

    @extend_schema(operation_id="services_list", responses=paginated(ServiceOut), summary="List the project's services")
    def get(self, request):
        paginator = Pagination()
        page = paginator.paginate_queryset(_services(request), request, view=self)
        return paginator.get_paginated_response(_out(page, many=True))

    @extend_schema(
        operation_id="services_create", request=ServiceSpecIn, responses={201: ServiceOut}, summary="Deploy a service"
    )
    def post(self, request):
        body = ServiceSpecIn(data=request.data)
        body.is_valid(raise_exception=True)
        service = writes.service_create(
            project=request_project(request), spec=dict(body.validated_data), by=_user(request)
        )
        return Response(_out(_services(request).get(pk=service.pk)), status=status.HTTP_201_CREATED)


class ServiceDetailView(APIView):
    access = {"get": member(), "patch": member(), "put": member(), "delete": member()}

    @extend_schema(operation_id="services_retrieve", responses=ServiceOut, summary="One service with its replicas")
    def get(self, request, name: str):
        return Response(_out(_one(request, name)))

    def _change(self, request, name: str, partial: bool):
        service = writes.get_service(project=request_project(request), name=name)
        body = ServiceSpecIn(data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        changes = dict(body.validated_data)
        if changes.pop("name", name) != name:
            raise InvalidInput("A service's name cannot change.", code="invalid_name")
        writes.service_update(service=service, changes=changes, by=_user(request))
        return Response(_out(_one(request, name)))

    @extend_schema(
        operation_id="services_partial_update",
        request=ServiceSpecIn,
        responses=ServiceOut,
        summary="Change part of a service's spec (a changed image, command, resources or env rolls out)",
    )
    def patch(self, request, name: str):
        return self._change(request, name, partial=True)

    @extend_schema(
        operation_id="services_update", request=ServiceSpecIn, responses=ServiceOut, summary="Replace a service's spec"
    )
    def put(self, request, name: str):
        return self._change(request, name, partial=False)

    @extend_schema(operation_id="services_destroy", responses={202: None}, summary="Delete a service (drains first)")
    def delete(self, request, name: str):
        service = writes.get_service(project=request_project(request), name=name)
        writes.service_delete(service=service, by=_user(request))
        return Response(status=status.HTTP_202_ACCEPTED)


class ServiceScaleView(APIView):
    access = {"post": member()}

    @extend_schema(
        operation_id="services_scale", request=ScaleIn, responses=ServiceOut, summary="Set the replica range"
    )
    def post(self, request, name: str):
        service = writes.get_service(project=request_project(request), name=name)
        body = ScaleIn(data=request.data)
        body.is_valid(raise_exception=True)
        writes.service_scale(service=service, replicas=body.validated_data["replicas"], by=_user(request))
        return Response(_out(_one(request, name)))


class ServiceLogsView(APIView):
    access = {"get": member()}

    @extend_schema(
        operation_id="services_logs",
        parameters=[OpenApiParameter("replica", int, description="one replica's log (default: every live replica)")],
        responses={(200, "text/plain"): OpenApiTypes.STR},
        summary="The tail of each replica's log",
    )
    def get(self, request, name: str):
        service = writes.get_service(project=request_project(request), name=name)
        raw = request.query_params.get("replica")
        if raw is not None:
            rows = [scoped.replica(service=service, replica_id=raw)]
        else:
            rows = list(service.replica_set.exclude(state="ended").order_by("id"))
        attempts = dict(
            scoped.jobs(project=service.project_id)
            .filter(pk__in=[r.job_id for r in rows if r.job_id])
            .values_list("pk", "current_attempt_id")
        )
        parts = []
        for r in rows:
            attempt = attempts.get(r.job_id)
            text = logstore.full_text(attempt) if attempt else ""
            if len(text) > LOG_TAIL_BYTES:
                text = text[-LOG_TAIL_BYTES:]
            parts.append(f"==> replica {r.pk} (job {r.job_id}, {r.state}, node {r.node_name or '-'}) <==\n{text}")
        return HttpResponse("\n".join(parts), content_type="text/plain; charset=utf-8")
