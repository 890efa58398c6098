"""Job API input (strict: unknown fields and container options refused) and output shapes."""

from __future__ import annotations

from drf_spectacular.drainage import set_override
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from euler.errors import InvalidInput
from jobs import deps, validation, workflow
from jobs.models import Attempt, Dependency, Job, JobArray, JobEvent
from nodeagent.gpumatch import GIB
from nodeagent.protocol import WARN_SIGNALS
from quotas.api.base import FieldsOnce, StrictSerializer, paginated


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
        for key, (check, default) in {**validation.FIELDS, **validation.WORKFLOW_FIELDS}.items():
            field = Checked(check, default)
            set_override(field, "field", _OPENAPI.get(key, OpenApiTypes.STR))  # for the OpenAPI schema only
            fields[key] = field
        return fields

    def validate(self, attrs):
        try:
            return validation.merge_gpus(dict(attrs), given=set(self.initial_data))
        except InvalidInput as exc:
            raise serializers.ValidationError({"gpus": [serializers.ErrorDetail(exc.message, code=exc.code)]}) from None


_OPENAPI = {
    "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "cpu_milli": OpenApiTypes.INT,
    "memory_bytes": OpenApiTypes.INT,
    "disk_bytes": OpenApiTypes.INT,
    "network": {"type": "string", "enum": ["default", "none"]},
    "gpu_count": OpenApiTypes.INT,
    "gpus": {
        "oneOf": [
            {"type": "integer", "minimum": 0, "maximum": 8},
            {
                "type": "object",
                "required": ["count"],
                "properties": {
                    "count": {"type": "integer", "minimum": 1, "maximum": 8},
                    "model": {"type": "string", "maxLength": 128, "description": "glob over the NVML name"},
                    "min_memory_gib": {"type": "number", "minimum": 0, "maximum": 4096},
                },
            },
        ]
    },
    "timeout_seconds": OpenApiTypes.INT,
    "stop_grace_seconds": {
        "type": "integer",
        "minimum": 0,
        "default": 30,
        "description": "every stop: SIGTERM, this many seconds, SIGKILL (at most the operator's EULER_MAX_STOP_GRACE)",
    },
    "warn_before_timeout_seconds": {
        "type": "integer",
        "minimum": 0,
        "default": 0,
        "description": "send warn_signal this many seconds before the timeout (0: no warning)",
    },
    "warn_signal": {"type": "string", "enum": sorted(WARN_SIGNALS), "default": "SIGUSR1"},
    "max_retries": OpenApiTypes.INT,
    "priority": {"type": "integer", "minimum": -100, "maximum": 100, "default": 0},
    "priority_class": {
        "type": "string",
        "maxLength": 63,
        "description": "a priority class's name; absent: the project's default",
    },
    "env": {"type": "object", "additionalProperties": {"type": "string"}, "writeOnly": True},
    "node_selector": {"type": "object", "additionalProperties": {"type": "string"}},
    "retry_on": {
        "type": "array",
        "items": {
            "oneOf": [
                {"type": "string", "enum": ["lost", "failed", "timeout"]},
                {
                    "type": "object",
                    "properties": {"exit_codes": {"type": "array", "items": {"type": ["integer", "string"]}}},
                },
            ]
        },
    },
    "retry_backoff": {
        "type": "object",
        "nullable": True,
        "properties": {"initial": {"type": "number"}, "factor": {"type": "number"}, "max": {"type": "number"}},
    },
    "pool": {"type": "string", "enum": ["any", "own"]},
    "min_trust": {"type": "string", "enum": ["community", "platform"]},
    "outputs": {
        "type": "object",
        "nullable": True,
        "properties": {"paths": {"type": "array", "items": {"type": "string"}}, "max_bytes": {"type": "integer"}},
    },
    "inputs_from": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"job": {"type": "integer"}, "path": {"type": "string"}, "to": {"type": "string"}},
        },
    },
    "checkpoint": {
        "type": "object",
        "nullable": True,
        "properties": {
            "path": {"type": "string"},
            "interval_seconds": {"type": "integer", "default": 300},
            "keep_last": {"type": "integer", "default": 2},
        },
        "required": ["path"],
    },
    "isolation": {"type": "string", "enum": ["default", "sandbox"], "default": "default"},
    "min_reliability": {"type": "number", "minimum": 0, "maximum": 100, "default": 0},
    "array": {
        "type": "object",
        "nullable": True,
        "properties": {"count": {"type": "integer", "minimum": 1}, "parallelism": {"type": "integer", "minimum": 1}},
        "required": ["count"],
    },
    "depends_on": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "job": {"type": "integer"},
                "array": {"type": "integer"},
                "condition": {"type": "string", "enum": ["succeeded", "ended"], "default": "succeeded"},
            },
        },
    },
}


class AttemptSerializer(FieldsOnce, serializers.ModelSerializer):
    node = serializers.CharField(source="node_name")

    class Meta:
        model = Attempt
        fields = [
            "id", "number", "node", "state", "exit_code", "reason", "message", "gpu_uuids", "cpu_milli",
            "memory_bytes", "disk_bytes", "created_at", "started_at", "ended_at", "log_bytes", "log_truncated",
            "runtime", "isolation", "gpu_stats", "stop_reason", "stop_grace",
        ]  # fmt: skip


class JobEventSerializer(FieldsOnce, serializers.ModelSerializer):
    attempt = serializers.IntegerField(source="attempt_id", allow_null=True)

    class Meta:
        model = JobEvent
        fields = ["from_state", "to_state", "reason", "message", "attempt", "created_at"]


class JobSerializer(FieldsOnce, serializers.ModelSerializer):
    """Env is write-only: the output says only whether the job has one."""

    gpus = serializers.SerializerMethodField()

    @extend_schema_field(
        {"type": "object", "properties": {"count": {"type": "integer"}, "model": {"type": "string"},
                                          "min_memory_gib": {"type": "number"}}}
    )  # fmt: skip
    def get_gpus(self, job: Job) -> dict:
        """The GPU request as asked: count, model glob ("" any), least memory per GPU in GiB (0 any)."""
        return {"count": job.gpu_count, "model": job.gpu_model, "min_memory_gib": job.gpu_min_memory_bytes / GIB}

    class Meta:
        model = Job
        fields = [
            "id", "name", "state", "image", "command", "cpu_milli", "memory_bytes", "disk_bytes",
            "network", "gpu_count", "gpus", "timeout_seconds", "has_env", "region", "node_selector", "max_retries", "retry_on", "pool",
            "min_trust", "retry_backoff", "pending_reason", "exit_code", "reason", "retries_used", "not_before",
            "created_at", "queued_at", "ended_at", "current_attempt",
            "priority", "outputs", "inputs_from", "outputs_truncated", "outputs_reason", "isolation", "array", "array_index",
            "min_reliability", "checkpoint", "stop_grace_seconds", "warn_before_timeout_seconds", "warn_signal",
            "priority_class", "priority_value",
        ]  # fmt: skip


class PriorityClassSerializer(serializers.Serializer):
    """A priority class as a project sees it (jobs.priorityclasses.visible)."""

    name = serializers.CharField()
    value = serializers.IntegerField()
    description = serializers.CharField()
    allowed = serializers.BooleanField(help_text="whether this project's jobs may ask for it")
    default = serializers.BooleanField(help_text="whether it is this project's default")


class DependencySerializer(FieldsOnce, serializers.ModelSerializer):
    """What a job or array waits for: one of `job` and `array`, the condition, and its verdict so far."""

    job = serializers.IntegerField(source="on_job_id", allow_null=True)
    array = serializers.IntegerField(source="on_array_id", allow_null=True)

    class Meta:
        model = Dependency
        fields = ["job", "array", "condition", "state"]


class JobDetailSerializer(JobSerializer):
    attempts = AttemptSerializer(many=True, read_only=True)
    events = JobEventSerializer(many=True, read_only=True)
    depends_on = DependencySerializer(source="dependencies", many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "depends_on", "attempts", "events"]


class ArraySerializer(serializers.ModelSerializer):
    """An array with its aggregate: `state` and `counts` per task state come from the caller's `counts` context
    (one grouped query per page, jobs.deps.counts_of)."""

    state = serializers.SerializerMethodField()
    counts = serializers.SerializerMethodField()
    pending_reason = serializers.SerializerMethodField()
    depends_on = DependencySerializer(source="dependencies", many=True, read_only=True)

    class Meta:
        model = JobArray
        fields = ["id", "name", "count", "parallelism", "state", "counts", "held", "pending_reason", "depends_on",
                  "created_at"]  # fmt: skip

    def _counts(self, obj) -> dict:
        return self.context["counts"][obj.pk]

    @extend_schema_field(OpenApiTypes.STR)
    def get_state(self, obj) -> str:
        return workflow.array_state(self._counts(obj), obj.count)

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "integer"}})
    def get_counts(self, obj) -> dict:
        return self._counts(obj)

    @extend_schema_field(OpenApiTypes.STR)
    def get_pending_reason(self, obj) -> str:
        return deps.reason_for(("array", obj.pk)) if obj.held else ""


class ArrayTaskSerializer(StrictSerializer):
    """Cancel or retry body: without `index`, the whole array."""

    index = serializers.IntegerField(required=False, min_value=0)


JOB_PAGE = paginated(JobSerializer)  # one component for every list of jobs (the job list, an array's tasks)
