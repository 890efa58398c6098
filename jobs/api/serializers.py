"""Job API input (strict: unknown fields and container options refused) and output shapes."""

from __future__ import annotations

from drf_spectacular.drainage import set_override
from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers

from euler.errors import InvalidInput
from jobs import validation
from jobs.models import Attempt, Job, JobEvent
from quotas.api.base import StrictSerializer


class Checked(serializers.Field):
    """A field checked by a pure function from jobs.validation; its InvalidInput code becomes the 400 code."""

    def __init__(self, check, default_factory=None, **kwargs):
        self.check = check
        self.default_factory = default_factory
        super().__init__(required=default_factory is None, **kwargs)

    def validate_empty_values(self, data):
        if data is serializers.empty:
            if self.default_factory is None:
                raise serializers.ValidationError("This field is required.", code="missing_field")
            return True, self.default_factory()
        return False, data

    def to_internal_value(self, data):
        try:
            return self.check(data)
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message, code=exc.code) from None

    def to_representation(self, value):
        return value


class JobCreateSerializer(StrictSerializer):
    """A job submission; unknown fields answer 400 unknown_field, container options 400 forbidden_option."""

    forbidden_fields = validation.FORBIDDEN_OPTIONS

    def get_fields(self):
        fields = {}
        for key, (check, default) in validation.FIELDS.items():
            field = Checked(check, default)
            set_override(field, "field", _OPENAPI.get(key, OpenApiTypes.STR))  # for the OpenAPI schema only
            fields[key] = field
        return fields


_OPENAPI = {
    "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "cpu_milli": OpenApiTypes.INT,
    "memory_bytes": OpenApiTypes.INT,
    "disk_bytes": OpenApiTypes.INT,
    "network": {"type": "string", "enum": ["default", "none"]},
    "gpu_count": OpenApiTypes.INT,
    "timeout_seconds": OpenApiTypes.INT,
    "max_retries": OpenApiTypes.INT,
    "priority": {"type": "integer", "minimum": -100, "maximum": 100, "default": 0},
    "env": {"type": "object", "additionalProperties": {"type": "string"}, "writeOnly": True},
    "node_selector": {"type": "object", "additionalProperties": {"type": "string"}},
    "retry_on": {"type": "array", "items": {"type": "string", "enum": ["lost", "failed", "timeout"]}},
    "pool": {"type": "string", "enum": ["any", "own"]},
    "min_trust": {"type": "string", "enum": ["community", "platform"]},
    "isolation": {"type": "string", "enum": ["default", "sandbox"], "default": "default"},
}


class AttemptSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node_name")

    class Meta:
        model = Attempt
        fields = [
            "id", "number", "node", "state", "exit_code", "reason", "message", "gpu_uuids", "cpu_milli",
            "memory_bytes", "disk_bytes", "created_at", "started_at", "ended_at", "log_bytes", "log_truncated",
            "runtime", "isolation",
        ]  # fmt: skip


class JobEventSerializer(serializers.ModelSerializer):
    attempt = serializers.IntegerField(source="attempt_id", allow_null=True)

    class Meta:
        model = JobEvent
        fields = ["from_state", "to_state", "reason", "message", "attempt", "created_at"]


class JobSerializer(serializers.ModelSerializer):
    """Env is write-only: the output says only whether the job has one."""

    class Meta:
        model = Job
        fields = [
            "id", "name", "state", "image", "command", "cpu_milli", "memory_bytes", "disk_bytes",
            "network", "gpu_count", "timeout_seconds", "has_env", "region", "node_selector", "max_retries", "retry_on", "pool",
            "min_trust", "pending_reason", "exit_code", "reason", "retries_used", "not_before",
            "created_at", "queued_at", "ended_at", "current_attempt",
            "priority", "isolation",
        ]  # fmt: skip


class JobDetailSerializer(JobSerializer):
    attempts = AttemptSerializer(many=True, read_only=True)
    events = JobEventSerializer(many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "attempts", "events"]
