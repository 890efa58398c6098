"""Job endpoints: they parse and present; jobs.services decides."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import arrays, priorityclasses, selectors, services
from jobs.api.array_views import array_body
from jobs.api.serializers import (
    JOB_PAGE,
    ArraySerializer,
    JobCreateSerializer,
    JobDetailSerializer,
    JobSerializer,
    PriorityClassSerializer,
)
from quotas.access import member
from quotas.api.base import Pagination, request_project


def _user(request):
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated and user.pk else None


class JobListCreateView(APIView):
    access = {"get": member(), "post": member()}

    @extend_schema(
        operation_id="jobs_list",
        parameters=[
            OpenApiParameter("state", str, description="comma-separated job states"),
            OpenApiParameter("array", str, description="an array's id: its tasks (without it, tasks are not listed)"),
        ],
        responses=JOB_PAGE,
    )
    def get(self, request):
        jobs = selectors.job_list(
            project=request_project(request),
            state=request.query_params.get("state"),
            array=request.query_params.get("array"),
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(jobs, request, view=self)
        return paginator.get_paginated_response(JobSerializer(page, many=True).data)

    @extend_schema(
        operation_id="jobs_create",
        request=JobCreateSerializer,
        responses={201: PolymorphicProxySerializer("JobOrArray", [JobDetailSerializer, ArraySerializer], None)},
    )
    def post(self, request):
        body = JobCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        spec = dict(body.validated_data)
        if spec.get("array"):
            array, depends_on = spec.pop("array"), spec.pop("depends_on")
            arr = arrays.array_submit(
                project=request_project(request), spec=spec, array=array, depends_on=depends_on, by=_user(request)
            )
            return Response(array_body(arr), status=status.HTTP_201_CREATED)
        job = services.job_submit(project=request_project(request), spec=spec, by=_user(request))
        job = selectors.job_get(project=request_project(request), job_id=job.pk)
        return Response(JobDetailSerializer(job).data, status=status.HTTP_201_CREATED)


class JobDetailView(APIView):
    access = {"get": member()}

    @extend_schema(operation_id="jobs_retrieve", responses=JobDetailSerializer)
    def get(self, request, job_id: int):
        job = selectors.job_get(project=request_project(request), job_id=job_id)
        return Response(JobDetailSerializer(job).data)


class JobCancelView(APIView):
    access = {"post": member()}

    @extend_schema(operation_id="jobs_cancel", request=None, responses=JobDetailSerializer)
    def post(self, request, job_id: int):
        project = request_project(request)
        services.job_cancel(job_id=job_id, project=project, by=_user(request))
        return Response(JobDetailSerializer(selectors.job_get(project=project, job_id=job_id)).data)


class JobRetryView(APIView):
    access = {"post": member()}

    @extend_schema(operation_id="jobs_retry", request=None, responses=JobDetailSerializer)
    def post(self, request, job_id: int):
        project = request_project(request)
        services.job_retry(job_id=job_id, project=project, by=_user(request))
        return Response(JobDetailSerializer(selectors.job_get(project=project, job_id=job_id)).data)


class PriorityClassListView(APIView):
    """The operator's priority classes, highest first: which this project may ask for, and its default."""

    access = {"get": member()}

    @extend_schema(operation_id="priority_classes_list", responses=PriorityClassSerializer(many=True))
    def get(self, request):
        classes = priorityclasses.visible(project=request_project(request))
        return Response(PriorityClassSerializer(classes, many=True).data)
