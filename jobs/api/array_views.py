"""Job array endpoints: list, detail with counts, tasks, cancel and retry of the whole array or one index."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import arrays, deps, selectors
from jobs.api.serializers import JOB_PAGE, ArraySerializer, ArrayTaskSerializer, JobSerializer
from jobs.workflow_models import JobArray
from quotas import scoped
from quotas.access import member
from quotas.api.base import Pagination, paginated, request_project


def _user(request):
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated and user.pk else None


def array_body(arr: JobArray) -> dict:
    arr = scoped.arrays(project=arr.project_id).prefetch_related("dependencies").get(pk=arr.pk)
    return ArraySerializer(arr, context={"counts": deps.counts_of([arr.pk])}).data


class ArrayListView(APIView):
    access = {"get": member()}

    @extend_schema(operation_id="arrays_list", responses=paginated(ArraySerializer))
    def get(self, request):
        qs = scoped.arrays(project=request_project(request)).prefetch_related("dependencies")
        paginator = Pagination()
        page = paginator.paginate_queryset(qs.order_by("-created_at", "-id"), request, view=self)
        counts = deps.counts_of([a.pk for a in page])
        return paginator.get_paginated_response(ArraySerializer(page, many=True, context={"counts": counts}).data)


class ArrayDetailView(APIView):
    access = {"get": member()}

    @extend_schema(operation_id="arrays_retrieve", responses=ArraySerializer)
    def get(self, request, array_id: int):
        return Response(array_body(arrays.array_get(project=request_project(request), array_id=array_id)))


class ArrayTasksView(APIView):
    access = {"get": member()}

    @extend_schema(
        operation_id="arrays_tasks",
        parameters=[OpenApiParameter("state", str, description="comma-separated job states")],
        responses=JOB_PAGE,
    )
    def get(self, request, array_id: int):
        arr = arrays.array_get(project=request_project(request), array_id=array_id)
        tasks = selectors.job_list(project=arr.project, state=request.query_params.get("state"), array=arr)
        paginator = Pagination()
        page = paginator.paginate_queryset(tasks.order_by("array_index"), request, view=self)
        return paginator.get_paginated_response(JobSerializer(page, many=True).data)


class ArrayCancelView(APIView):
    access = {"post": member()}

    @extend_schema(operation_id="arrays_cancel", request=ArrayTaskSerializer, responses=ArraySerializer)
    def post(self, request, array_id: int):
        body = ArrayTaskSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        project = request_project(request)
        arr = arrays.array_cancel(
            project=project, array_id=array_id, index=body.validated_data.get("index"), by=_user(request)
        )
        return Response(array_body(arr))


class ArrayRetryView(APIView):
    access = {"post": member()}

    @extend_schema(operation_id="arrays_retry", request=ArrayTaskSerializer, responses=ArraySerializer)
    def post(self, request, array_id: int):
        body = ArrayTaskSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        project = request_project(request)
        arr = arrays.array_retry(
            project=project, array_id=array_id, index=body.validated_data.get("index"), by=_user(request)
        )
        return Response(array_body(arr))
