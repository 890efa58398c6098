from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import services
from agents.api.serializers import AgentCreateIn, AgentOut, AgentPatchIn, InstanceIn, InstanceOut, InstancePatchIn
from agents.models import Agent, AgentInstance
from quotas.access import member, owner
from quotas.api.base import Pagination, paginated, request_project

# Where the owner's upstream credentials go is the owner's choice: a member may run an agent, not aim it.
SECRET_ROUTING = ("auth_header_name", "auth_header_value")


def _agents(request):
    return Agent.objects.filter(project=request_project(request)).prefetch_related(
        Prefetch("instances", queryset=AgentInstance.objects.order_by("id"))
    )


class AgentListView(APIView):
    access = {"get": member(), "post": member()}

    @extend_schema(
        operation_id="agents_list",
        responses=paginated(AgentOut),
        summary="List the project's agents with instance health",
    )
    def get(self, request):
        paginator = Pagination()
        page = paginator.paginate_queryset(_agents(request), request, view=self)
        return paginator.get_paginated_response(AgentOut(page, many=True).data)

    @extend_schema(request=AgentCreateIn, responses={201: AgentOut}, summary="Register an agent")
    def post(self, request):
        data = AgentCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        instances = fields.pop("instances")
        agent = services.agent_create(project=request_project(request), fields=fields, instances=instances)
        return Response(AgentOut(_agents(request).get(pk=agent.pk)).data, status=status.HTTP_201_CREATED)


class AgentDetailView(APIView):
    access = {"get": member(), "patch": member(owner_fields=SECRET_ROUTING), "delete": member()}

    @extend_schema(responses=AgentOut, summary="One agent with its instances")
    def get(self, request, name: str):
        agent = services.get_agent(project=request_project(request), name=name)
        return Response(AgentOut(_agents(request).get(pk=agent.pk)).data)

    @extend_schema(request=AgentPatchIn, responses=AgentOut, summary="Change an agent's settings")
    def patch(self, request, name: str):
        agent = services.get_agent(project=request_project(request), name=name)
        data = AgentPatchIn(data=request.data)
        data.is_valid(raise_exception=True)
        services.agent_update(agent=agent, fields=dict(data.validated_data))
        return Response(AgentOut(_agents(request).get(pk=agent.pk)).data)

    @extend_schema(responses={204: None}, summary="Delete an agent and its instances")
    def delete(self, request, name: str):
        services.agent_delete(agent=services.get_agent(project=request_project(request), name=name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class InstanceListView(APIView):
    access = {"get": member(), "post": owner()}

    @extend_schema(responses=InstanceOut(many=True), summary="List an agent's instances")
    def get(self, request, name: str):
        agent = services.get_agent(project=request_project(request), name=name)
        return Response(InstanceOut(agent.instances.order_by("id"), many=True).data)

    @extend_schema(request=InstanceIn, responses={201: InstanceOut}, summary="Add an instance")
    def post(self, request, name: str):
        agent = services.get_agent(project=request_project(request), name=name)
        data = InstanceIn(data=request.data)
        data.is_valid(raise_exception=True)
        instance = services.instance_add(agent=agent, spec=dict(data.validated_data))
        return Response(InstanceOut(instance).data, status=status.HTTP_201_CREATED)


class InstanceDetailView(APIView):
    access = {"get": member(), "patch": member(owner_fields=("base_url",)), "delete": member()}

    def _instance(self, request, name, instance_id):
        agent = services.get_agent(project=request_project(request), name=name)
        return services.get_instance(agent=agent, instance_id=instance_id)

    @extend_schema(responses=InstanceOut, summary="One instance with its health")
    def get(self, request, name: str, instance_id: int):
        return Response(InstanceOut(self._instance(request, name, instance_id)).data)

    @extend_schema(request=InstancePatchIn, responses=InstanceOut, summary="Change an instance")
    def patch(self, request, name: str, instance_id: int):
        instance = self._instance(request, name, instance_id)
        data = InstancePatchIn(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(InstanceOut(services.instance_update(instance=instance, fields=dict(data.validated_data))).data)

    @extend_schema(responses={204: None}, summary="Remove an instance")
    def delete(self, request, name: str, instance_id: int):
        services.instance_delete(instance=self._instance(request, name, instance_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
