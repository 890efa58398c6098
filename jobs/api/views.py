"""Job endpoints: they parse and present; jobs.services decides."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import selectors, services
from jobs.api.serializers import JobCreateSerializer, JobDetailSerializer, JobSerializer
from quotas.access import member
from quotas.api.base import Pagination, paginated, request_project


def _user(request):
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated and user.pk else None


class JobListCreateView(APIView):
    access = {"get": member(), "post": member()}

    @extend_schema(
        operation_id="jobs_list",
        parameters=[OpenApiParameter("state", str, description="comma-separated job states")],
        responses=paginated(JobSerializer),
    )
    def get(self, request):
        jobs = selectors.job_list(project=request_project(request), state=request.query_params.get("state"))
        paginator = Pagination()
        page = paginator.paginate_queryset(jobs, request, view=self)
        return paginator.get_paginated_response(JobSerializer(page, many=True).data)

    @extend_schema(operation_id="jobs_create", request=JobCreateSerializer, responses={201: JobDetailSerializer})
    def post(self, request):
        body = JobCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = services.job_submit(project=request_project(request), spec=dict(body.validated_data), by=_user(request))
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
