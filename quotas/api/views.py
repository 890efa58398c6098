from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from quotas import selectors, services
from quotas.access import member
from quotas.api.base import Pagination, paginated, request_project, request_role, request_user
from quotas.api.serializers import ApiKeyCreatedOut, ApiKeyCreateIn, ApiKeyOut, ProjectOut
from quotas.models import ApiKey


class ProjectView(APIView):
    access = {"get": member()}

    @extend_schema(responses=ProjectOut, summary="The caller's project: quota, usage so far, period")
    def get(self, request):
        return Response(ProjectOut(selectors.project_summary(request_project(request))).data)


class ApiKeyListView(APIView):
    access = {"get": member(), "post": member(note="a key's role is at most the caller's")}

    @extend_schema(responses=paginated(ApiKeyOut), summary="List the project's API keys (never the secrets)")
    def get(self, request):
        keys = ApiKey.objects.filter(project=request_project(request)).select_related("created_by")
        paginator = Pagination()
        page = paginator.paginate_queryset(keys, request, view=self)
        return paginator.get_paginated_response(ApiKeyOut(page, many=True).data)

    @extend_schema(
        request=ApiKeyCreateIn,
        responses={201: ApiKeyCreatedOut},
        summary="Create an API key (its role is at most the caller's, and by default the caller's)",
    )
    def post(self, request):
        data = ApiKeyCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        key, secret = services.apikey_create(
            project=request_project(request),
            label=data.validated_data["label"],
            by=request_user(request),
            role=data.validated_data.get("role"),
            cap=request_role(request),
            rpm_limit=data.validated_data["rpm_limit"],
        )
        key.key = secret
        return Response(ApiKeyCreatedOut(key).data, status=status.HTTP_201_CREATED)


class ApiKeyDetailView(APIView):
    access = {"delete": member(note="only keys they made")}

    @extend_schema(responses={204: None}, summary="Revoke an API key (a member: only keys they made)")
    def delete(self, request, key_id: int):
        services.apikey_revoke(
            project=request_project(request), key_id=key_id, by=request_user(request), role=request_role(request)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
