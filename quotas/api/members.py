"""REST views for project members and one-time invitation links (owner-only writes)."""

from datetime import timedelta

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from quotas import invitations, members
from quotas.access import member, owner
from quotas.api.base import Pagination, paginated, request_project, request_user
from quotas.api.serializers import (
    InvitationCreatedOut,
    InvitationCreateIn,
    InvitationOut,
    MemberOut,
    MemberUpdateIn,
)


def _paginated(view, request, queryset, serializer):
    paginator = Pagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer(page, many=True).data)


class InvitationListView(APIView):
    access = {"get": owner(), "post": owner()}

    @extend_schema(responses=paginated(InvitationOut), summary="List the project's invitations (never the tokens)")
    def get(self, request):
        return _paginated(self, request, invitations.invitations_for(request_project(request)), InvitationOut)

    @extend_schema(
        request=InvitationCreateIn,
        responses={201: InvitationCreatedOut},
        summary="Create a one-time invitation link (owner only); the token is shown once",
    )
    def post(self, request):
        data = InvitationCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        by = request_user(request)
        new = invitations.invitation_create(
            project=request_project(request),
            role=data.validated_data["role"],
            ttl=timedelta(days=data.validated_data["expires_in_days"]),
            by=by,
        )
        invitation = new.invitation
        invitation.token = new.token
        invitation.url = new.url
        return Response(InvitationCreatedOut(invitation).data, status=status.HTTP_201_CREATED)


class InvitationDetailView(APIView):
    access = {"delete": owner()}

    @extend_schema(responses={204: None}, summary="Revoke an unused invitation (owner only)")
    def delete(self, request, invitation_id: int):
        invitations.invitation_revoke(project=request_project(request), invitation_id=invitation_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemberListView(APIView):
    access = {"get": member()}

    @extend_schema(responses=paginated(MemberOut), summary="List the project's members and their roles")
    def get(self, request):
        return _paginated(self, request, members.members_of(request_project(request)), MemberOut)


class MemberDetailView(APIView):
    access = {"patch": owner(), "delete": owner()}

    @extend_schema(request=MemberUpdateIn, responses=MemberOut, summary="Change a member's role (owner only)")
    def patch(self, request, user_id: int):
        data = MemberUpdateIn(data=request.data)
        data.is_valid(raise_exception=True)
        membership = members.member_change_role(
            project=request_project(request), user_id=user_id, role=data.validated_data["role"]
        )
        return Response(MemberOut(membership).data)

    @extend_schema(responses={204: None}, summary="Remove a member (owner only; the last owner stays)")
    def delete(self, request, user_id: int):
        members.member_remove(project=request_project(request), user_id=user_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
