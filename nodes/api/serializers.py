from rest_framework import serializers

from nodes.models import EnrollmentToken, Node, TrustLevel
from quotas.api.base import StrictSerializer


class EnrollmentTokenCreateIn(StrictSerializer):
    trust = serializers.ChoiceField(choices=TrustLevel.choices, default=TrustLevel.UNTRUSTED)
    platform = serializers.BooleanField(default=False, help_text="A platform token (staff only): no owner project.")
    ttl = serializers.IntegerField(required=False, help_text="Lifetime in seconds, 60 to 604800.")
    region = serializers.CharField(max_length=63, required=False, allow_blank=True, default="")
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False, default=dict)
    label = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


class EnrollmentTokenOut(serializers.ModelSerializer):
    prefix = serializers.SerializerMethodField()
    platform = serializers.SerializerMethodField()
    used = serializers.SerializerMethodField()
    node = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)

    class Meta:
        model = EnrollmentToken
        fields = [
            "id",
            "prefix",
            "label",
            "platform",
            "trust",
            "region",
            "labels",
            "created_at",
            "expires_at",
            "used",
            "used_at",
            "node",
        ]

    def get_prefix(self, obj) -> str:
        return f"euler_enroll_{obj.lookup}"

    def get_platform(self, obj) -> bool:
        return obj.project_id is None

    def get_used(self, obj) -> bool:
        return obj.used_at is not None


class EnrollmentTokenCreatedOut(EnrollmentTokenOut):
    token = serializers.CharField(help_text="The secret. Shown once: pass it to the agent as EULER_ENROLLMENT_TOKEN.")

    class Meta(EnrollmentTokenOut.Meta):
        fields = [*EnrollmentTokenOut.Meta.fields, "token"]


class GpuOut(serializers.Serializer):
    uuid = serializers.CharField()
    index = serializers.IntegerField()
    model = serializers.CharField()
    memory_bytes = serializers.IntegerField()
    memory_used_bytes = serializers.IntegerField(required=False)
    utilization = serializers.FloatField(required=False)
    healthy = serializers.BooleanField(default=True, help_text="False: no jobs go to it (see health_reason)")
    health_reason = serializers.CharField(default="", help_text='The agent\'s finding, e.g. "XID 79"')


class RuntimeOut(serializers.Serializer):
    name = serializers.CharField()
    sandbox = serializers.BooleanField()
    networks = serializers.ListField(child=serializers.CharField())
    default = serializers.BooleanField(required=False)


class NodeOut(serializers.ModelSerializer):
    gpus = GpuOut(many=True)
    pending_capacity = serializers.DictField(
        child=serializers.JSONField(),
        help_text="Figures the node reported above its approved capacity (and, under `runtimes`, a runtime set with "
        "runtimes not approved yet), waiting for an operator's approval.",
    )
    runtimes = RuntimeOut(many=True)

    class Meta:
        model = Node
        fields = [
            "id",
            "name",
            "approval",
            "trust",
            "public_pool",
            "draining",
            "reclaimed_at",
            "reclaimed_by",
            "reclaim_count",
            "online",
            "region",
            "labels",
            "hostname",
            "agent_version",
            "docker_version",
            "cpu_milli",
            "memory_bytes",
            "disk_bytes",
            "approved_cpu_milli",
            "approved_memory_bytes",
            "approved_disk_bytes",
            "pending_capacity",
            "gpus",
            "capped",
            "job_egress",
            "job_egress_error",
            "allowed_images",
            "runtimes",
            "approved_runtimes",
            "lender_min_isolation",
            "allocated_cpu_milli",
            "allocated_memory_bytes",
            "allocated_disk_bytes",
            "allocated_gpus",
            "last_heartbeat_at",
            "enrolled_at",
            "approved_at",
            "reliability",
        ]


class NodeListOut(serializers.Serializer):
    own = NodeOut(many=True)
    public_pool = serializers.DictField()


class ReclaimIn(serializers.Serializer):
    grace = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="Seconds between SIGTERM and SIGKILL for every attempt stopped (default: each job's "
        "stop_grace_seconds; at most EULER_MAX_STOP_GRACE).",
    )


class ReclaimOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    reclaimed = serializers.BooleanField()
    reclaimed_at = serializers.DateTimeField(allow_null=True)
    reclaimed_by = serializers.CharField(help_text="node, lender or operator: who may resume (or someone above)")
    reclaim_count = serializers.IntegerField()
    stopped = serializers.IntegerField(required=False, help_text="attempts asked to stop by this reclaim")
