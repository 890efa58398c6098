from rest_framework import serializers

from agents.models import Agent, AgentInstance
from quotas.api.base import StrictSerializer


class InstanceIn(StrictSerializer):
    base_url = serializers.CharField(max_length=2000)
    weight = serializers.IntegerField(min_value=1, max_value=1000, default=1)
    enabled = serializers.BooleanField(default=True)


class InstancePatchIn(StrictSerializer):
    base_url = serializers.CharField(max_length=2000, required=False)
    weight = serializers.IntegerField(min_value=1, max_value=1000, required=False)
    enabled = serializers.BooleanField(required=False)


class AgentPatchIn(StrictSerializer):
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    health_path = serializers.CharField(max_length=255, required=False)
    health_interval_s = serializers.IntegerField(min_value=2, max_value=3600, required=False)
    health_timeout_s = serializers.FloatField(min_value=0.1, max_value=60, required=False)
    connect_timeout_s = serializers.FloatField(min_value=0.1, max_value=60, required=False)
    response_timeout_s = serializers.FloatField(min_value=0.1, max_value=3600, required=False)
    idle_timeout_s = serializers.FloatField(min_value=1, max_value=86400, required=False)
    auth_header_name = serializers.CharField(max_length=100, required=False, allow_blank=True)
    auth_header_value = serializers.CharField(
        max_length=4096, required=False, allow_blank=True, allow_null=True, write_only=True, trim_whitespace=False
    )


class AgentCreateIn(AgentPatchIn):
    name = serializers.CharField(max_length=63)
    instances = InstanceIn(many=True, required=False, default=list)


class InstanceOut(serializers.ModelSerializer):
    class Meta:
        model = AgentInstance
        fields = [
            "id",
            "base_url",
            "weight",
            "enabled",
            "health",
            "last_check_at",
            "last_error",
            "consecutive_successes",
            "consecutive_failures",
            "latency_ms",
            "created_at",
        ]


class AgentOut(serializers.ModelSerializer):
    instances = InstanceOut(many=True, read_only=True)
    has_auth_header = serializers.BooleanField(read_only=True)

    class Meta:
        model = Agent
        fields = [
            "name",
            "description",
            "health_path",
            "health_interval_s",
            "health_timeout_s",
            "connect_timeout_s",
            "response_timeout_s",
            "idle_timeout_s",
            "auth_header_name",
            "has_auth_header",
            "instances",
            "created_at",
            "updated_at",
        ]


class StatsBucketOut(serializers.Serializer):
    calls = serializers.IntegerField()
    success_rate = serializers.FloatField(allow_null=True)
    p50_ms = serializers.FloatField(allow_null=True)
    p95_ms = serializers.FloatField(allow_null=True)
    p99_ms = serializers.FloatField(allow_null=True)
