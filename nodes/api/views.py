from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from euler.errors import InvalidInput, NotFound
from nodes import selectors, services
from nodes.api.serializers import (
    EnrollmentTokenCreatedOut,
    EnrollmentTokenCreateIn,
    EnrollmentTokenOut,
    NodeListOut,
    NodeOut,
    ReclaimIn,
    ReclaimOut,
)
from nodes.liveness import live_last_seen
from quotas.access import member
from quotas.api.base import Pagination, paginated, request_project, request_user


def _user(request):
    return request.user if getattr(request.user, "pk", None) else None


def _is_staff(request) -> bool:
    return bool(getattr(request.user, "is_staff", False))


class NodeListView(APIView):
    access = {"get": member()}

    @extend_schema(
        operation_id="nodes_list",
        responses=NodeListOut,
        summary="The project's own nodes in full, and the public pool as a summary",
    )
    def get(self, request):
        own = selectors.nodes_of_project(request_project(request))
        pool = selectors.pool_summary(selectors.public_pool_nodes())
        return Response({"own": NodeOut(live_last_seen(own), many=True).data, "public_pool": pool})


class NodeDetailView(APIView):
    access = {"get": member()}

    @extend_schema(operation_id="nodes_retrieve", responses=NodeOut, summary="One of the project's own nodes")
    def get(self, request, node_id: int):
        node = selectors.node_of_project(project=request_project(request), node_id=node_id)
        if node is None:
            raise NotFound("No such node.")
        return Response(NodeOut(live_last_seen([node])[0]).data)


def _reclaimable(request, node_id: int):
    """The node and the caller's authority over it: the operator (staff) any node, its lender (who created its
    enrollment token) their own; anyone else 404, as for a node that does not exist."""
    from lending.machines import lent_nodes
    from nodes import reclaim
    from nodes.models import Node

    user = request_user(request)
    if getattr(user, "is_staff", False):
        node = Node.objects.filter(pk=node_id).first()
        authority = reclaim.OPERATOR
    else:
        node = lent_nodes(user).filter(pk=node_id).first()
        authority = reclaim.LENDER
    if node is None:
        raise NotFound("No such node among the machines you lent.")
    return node, authority


class NodeReclaimView(APIView):
    access = {"post": member(note="the node's lender; staff: any node")}

    @extend_schema(
        operation_id="nodes_reclaim",
        request=ReclaimIn,
        responses=ReclaimOut,
        summary="Take a lent machine back: no new work until resumed; running jobs stopped with their grace and "
        "requeued elsewhere without spending a retry",
    )
    def post(self, request, node_id: int):
        from nodes import reclaim

        body = request.data if isinstance(request.data, dict) else {}
        unknown = set(body) - {"grace"}
        if unknown:
            raise InvalidInput(f"Unknown field(s): {', '.join(sorted(unknown))}.", code="unknown_field")
        node, authority = _reclaimable(request, node_id)
        state = reclaim.node_reclaim(node=node, authority=authority, grace=body.get("grace"), by=request_user(request))
        return Response(ReclaimOut(state).data)


class NodeResumeView(APIView):
    access = {"post": member(note="the node's lender; staff: any node")}

    @extend_schema(
        operation_id="nodes_resume",
        request=None,
        responses=ReclaimOut,
        summary="Give a reclaimed machine back to the pool (409 reclaimed_by_higher: the operator reclaimed it)",
    )
    def post(self, request, node_id: int):
        from nodes import reclaim

        node, authority = _reclaimable(request, node_id)
        return Response(ReclaimOut(reclaim.node_resume(node=node, authority=authority, by=request_user(request))).data)


class EnrollmentTokenListView(APIView):
    access = {"get": member(), "post": member(note="platform tokens: staff only")}

    @extend_schema(responses=paginated(EnrollmentTokenOut), summary="List enrollment tokens (never the secrets)")
    def get(self, request):
        tokens = selectors.enrollment_tokens_for(project=request_project(request), staff=_is_staff(request))
        paginator = Pagination()
        page = paginator.paginate_queryset(tokens, request, view=self)
        return paginator.get_paginated_response(EnrollmentTokenOut(page, many=True).data)

    @extend_schema(
        request=EnrollmentTokenCreateIn,
        responses={201: EnrollmentTokenCreatedOut},
        summary="Create a one-time enrollment token",
    )
    def post(self, request):
        data = EnrollmentTokenCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        platform = v["platform"] or v["trust"] == "platform"
        if platform and not _is_staff(request):
            from euler.errors import Forbidden

            raise Forbidden("Only staff create platform enrollment tokens.", code="platform_token_staff_only")
        token, secret = services.enrollment_token_create(
            project=None if platform else request_project(request),
            trust=v["trust"],
            ttl=v.get("ttl"),
            region=v["region"],
            labels=v["labels"],
            label=v["label"],
            by=_user(request),
        )
        token.token = secret
        return Response(EnrollmentTokenCreatedOut(token).data, status=status.HTTP_201_CREATED)


class EnrollmentTokenDetailView(APIView):
    access = {"delete": member()}

    @extend_schema(responses={204: None}, summary="Revoke an enrollment token")
    def delete(self, request, token_id: int):
        project = request_project(request)
        try:
            services.enrollment_token_delete(token_id=token_id, project=project)
        except NotFound:
            if not _is_staff(request):
                raise
            services.enrollment_token_delete(token_id=token_id, project=None, staff=True)
        return Response(status=status.HTTP_204_NO_CONTENT)
