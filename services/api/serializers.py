"""Service API input (strict: unknown fields and container options refused) and output shapes."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.drainage import set_override
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from euler.errors import InvalidInput
from jobs import validation as jobs_validation
from jobs.api.serializers import _OPENAPI as JOB_OPENAPI
from jobs.api.serializers import Checked
from nodeagent.gpumatch import GIB
from quotas.api.base import StrictSerializer
from services import validation
from services.models import Replica, Service, ServiceEvent

REPLICAS_SCHEMA = {
    "oneOf": [
        {"type": "integer", "minimum": 1},
        {
            "type": "object",
            "required": ["min"],
            "properties": {"min": {"type": "integer", "minimum": 0}, "max": {"type": "integer", "minimum": 1}},
        },
    ]
}
READINESS_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "default": "/health"},
        "interval_seconds": {"type": "integer", "minimum": 1, "maximum": 300, "default": 5},
        "timeout_seconds": {"type": "number", "minimum": 0.1, "maximum": 60, "default": 2},
        "failures": {"type": "integer", "minimum": 1, "maximum": 100, "default": 3},
    },
}


def _service_fields() -> dict:
    """Field name -> (check, default; None: required) of the service part."""

    def replicas(value):
        return validation.replicas(value, limit=settings.EULER_SERVICE_MAX_REPLICAS)

    return {
        "name": (_name, None),
        "port": (validation.port, None),
        "replicas": (replicas, lambda: {"min": 1, "max": 1}),
        "readiness": (validation.readiness, lambda: dict(validation.PROBE_DEFAULTS)),
        "target_concurrency": (validation.target_concurrency, lambda: 10),
        "scale_to_zero_after_seconds": (validation.scale_to_zero_after_seconds, lambda: None),
    }


def _name(value):
    from agents.services import validate_name

    return validate_name(value)


_OPENAPI = {
    **JOB_OPENAPI,
    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
    "replicas": REPLICAS_SCHEMA,
    "readiness": READINESS_SCHEMA,
    "target_concurrency": {"type": "integer", "minimum": 1, "default": 10},
    "scale_to_zero_after_seconds": {"type": "integer", "minimum": 10, "nullable": True},
}


class Optional(Checked):
    """A PATCH field: absent means unchanged."""

    def __init__(self, check):
        super().__init__(check, None)
        self.required = False

    def validate_empty_values(self, data):
        if data is serializers.empty:
            raise serializers.SkipField()
        return False, data


class ServiceSpecIn(StrictSerializer):
    """A service spec: the job part as a job submission takes it, and the service part. With `partial=True`
    (PATCH) every field is optional and absent ones keep their value."""

    forbidden_fields = jobs_validation.FORBIDDEN_OPTIONS

    def get_fields(self):
        fields = {}
        for key, (check, default) in {**_service_fields(), **validation.job_checks()}.items():
            if self.partial:
                field = Optional(check)
            else:
                field = Checked(check, default)
            set_override(field, "field", _OPENAPI.get(key, OpenApiTypes.STR))
            fields[key] = field
        return fields

    def validate(self, attrs):
        try:
            return jobs_validation.merge_gpus(dict(attrs), given=set(self.initial_data))
        except InvalidInput as exc:
            raise serializers.ValidationError({"gpus": [serializers.ErrorDetail(exc.message, code=exc.code)]}) from None


class ScaleIn(StrictSerializer):
    replicas = serializers.JSONField()

    def validate_replicas(self, value):
        try:
            return validation.replicas(value, limit=settings.EULER_SERVICE_MAX_REPLICAS)
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message, code=exc.code) from None


class ReplicaOut(serializers.ModelSerializer):
    job = serializers.IntegerField(source="job_id", allow_null=True)
    attempt = serializers.IntegerField(source="attempt_id", allow_null=True)
    node = serializers.CharField(source="node_name")
    health = serializers.SerializerMethodField()

    class Meta:
        model = Replica
        fields = ["id", "revision", "state", "reason", "job", "attempt", "node", "health", "created_at", "ready_at",
                  "drain_started_at", "ended_at"]  # fmt: skip

    @extend_schema_field({"type": "string", "nullable": True})
    def get_health(self, replica) -> str | None:
        return replica.instance.health if replica.instance_id and replica.instance else None


class EventOut(serializers.ModelSerializer):
    class Meta:
        model = ServiceEvent
        fields = ["kind", "message", "created_at"]


class ServiceOut(serializers.ModelSerializer):
    replicas = serializers.SerializerMethodField()
    readiness = serializers.JSONField(source="probe")
    spec = serializers.SerializerMethodField()
    ready_replicas = serializers.SerializerMethodField()
    replica_list = serializers.SerializerMethodField()
    events = serializers.SerializerMethodField()
    invoke_path = serializers.SerializerMethodField()

    class Meta:
        model = Service
        fields = ["name", "port", "replicas", "ready_replicas", "target_concurrency", "scale_to_zero_after_seconds",
                  "readiness", "revision", "stable_revision", "rollout", "message", "spec", "invoke_path",
                  "replica_list", "events", "created_at", "updated_at"]  # fmt: skip

    @extend_schema_field({"type": "object", "properties": {"min": {"type": "integer"}, "max": {"type": "integer"},
                                                           "current": {"type": "integer"}}})  # fmt: skip
    def get_replicas(self, service) -> dict:
        return {"min": service.min_replicas, "max": service.max_replicas, "current": service.replicas}

    @extend_schema_field(OpenApiTypes.INT)
    def get_ready_replicas(self, service) -> int:
        return sum(1 for r in self._replicas(service) if r.state == "ready")

    @extend_schema_field({"type": "object"})
    def get_spec(self, service) -> dict:
        """The job part of the current revision (env never shown: `has_env` says whether it has one)."""
        rev = self.context.get("revisions", {}).get(service.pk)
        if rev is None:
            return {}
        spec = dict(rev.spec)
        spec["gpus"] = {"count": spec.get("gpu_count", 0), "model": spec.pop("gpu_model", ""),
                        "min_memory_gib": spec.pop("gpu_min_memory_bytes", 0) / GIB}  # fmt: skip
        spec["has_env"] = bool(rev.env)
        return spec

    def _replicas(self, service) -> list:
        return [r for r in service.replica_set.all() if r.state != "ended"]

    @extend_schema_field(ReplicaOut(many=True))
    def get_replica_list(self, service) -> list:
        return ReplicaOut(self._replicas(service), many=True).data

    @extend_schema_field(EventOut(many=True))
    def get_events(self, service) -> list:
        return EventOut(service.events.all()[:20], many=True).data

    @extend_schema_field(OpenApiTypes.STR)
    def get_invoke_path(self, service) -> str:
        return f"/api/v1/agents/{service.name}/invoke/"
