"""Nodes: the machines that run work, their one-time enrollment tokens, and what happened to them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TrustLevel(models.TextChoices):
    PLATFORM = "platform", "Platform"
    COMMUNITY = "community", "Community"
    UNTRUSTED = "untrusted", "Untrusted"


class Approval(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class EventKind(models.TextChoices):
    ENROLLED = "enrolled", "Enrolled"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    TRUST_CHANGED = "trust_changed", "Trust changed"
    POOL_CHANGED = "pool_changed", "Public pool changed"
    DRAINED = "drained", "Drained"
    UNDRAINED = "undrained", "Undrained"
    ONLINE = "online", "Back online"
    OFFLINE = "offline", "Offline"
    GPUS_CHANGED = "gpus_changed", "GPU set changed"
    CREDENTIAL_ROTATED = "credential_rotated", "Credential rotated"
    CREDENTIAL_REVOKED = "credential_revoked", "Credential revoked"
    CAPACITY_APPROVED = "capacity_approved", "Capacity change approved"
    GPU_UNHEALTHY = "gpu_unhealthy", "GPU unhealthy"
    GPU_HEALTHY = "gpu_healthy", "GPU healthy again"
    GPU_RESET = "gpu_reset", "GPU reset requested"
    RECLAIMED = "reclaimed", "Reclaimed by its lender"
    RESUMED = "resumed", "Resumed after a reclaim"


class Node(models.Model):
    name = models.CharField(max_length=63, unique=True)
    region = models.CharField(max_length=63, blank=True, default="")
    labels = models.JSONField(default=dict, blank=True)
    hostname = models.CharField(max_length=255, blank=True, default="")
    agent_version = models.CharField(max_length=64, blank=True, default="")
    docker_version = models.CharField(max_length=64, blank=True, default="")
    owner_project = models.ForeignKey(
        "quotas.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes"
    )
    trust = models.CharField(max_length=10, choices=TrustLevel.choices, default=TrustLevel.UNTRUSTED)
    public_pool = models.BooleanField(default=False)
    approval = models.CharField(max_length=10, choices=Approval.choices, default=Approval.PENDING, db_index=True)
    draining = models.BooleanField(default=False)
    # Taken back by its lender (or the operator: nodes/reclaim.py): no placements while set, until a resume by whoever
    # may (`reclaimed_by`: node < lender < operator). The count of reclaims is kept across resumes.
    reclaimed_at = models.DateTimeField(null=True, blank=True)
    reclaimed_by = models.CharField(max_length=10, blank=True, default="")
    reclaim_count = models.IntegerField(default=0)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Stored rather than computed so that the offline transition happens once, with an event and a signal.
    online = models.BooleanField(default=False)
    cpu_milli = models.BigIntegerField(default=0)
    memory_bytes = models.BigIntegerField(default=0)
    gpus = models.JSONField(default=list, blank=True)  # list of protocol.GpuInfo dicts, live figures included
    gpu_fingerprint = models.CharField(max_length=64, blank=True, default="")  # pinned at approval
    # Operators' GPU resets: {uuid: a number that grows with each reset}, sent in every heartbeat reply; the agent
    # clears its health mark once per new number (nodes/gpuhealth.py).
    gpu_resets = models.JSONField(default=dict, blank=True)
    # Free space of Docker's data root, capped by the lender; null: not reported (an older agent), not counted.
    disk_bytes = models.BigIntegerField(null=True, blank=True, default=None)
    # Capacity pinned at approval (null: not pinned, a node never approved). `cpu_milli`, `memory_bytes` and
    # `disk_bytes` above are what the scheduler may use: what the node reports, never above these; a report above
    # them waits in `pending_capacity` ({field: reported figure}) until an operator approves it.
    approved_cpu_milli = models.BigIntegerField(null=True, blank=True, default=None)
    approved_memory_bytes = models.BigIntegerField(null=True, blank=True, default=None)
    approved_disk_bytes = models.BigIntegerField(null=True, blank=True, default=None)
    pending_capacity = models.JSONField(default=dict, blank=True)
    capped = models.JSONField(default=list, blank=True)  # what the lender's caps lowered: cpu, memory, disk, gpus
    # The job network policy the agent enforces (public | none | unrestricted; "" from an older agent) and, when
    # its rules could not be installed, why it refuses networked jobs.
    job_egress = models.CharField(max_length=16, blank=True, default="")
    job_egress_error = models.CharField(max_length=500, blank=True, default="")
    # The lender's image patterns (EULER_NODE_ALLOWED_IMAGES): jobs whose image matches none are not placed here.
    allowed_images = models.JSONField(default=list, blank=True)
    # The container runtimes the agent's probe found working (protocol.RuntimeInfo dicts), under the set pinned
    # at approval (`approved_runtimes`, null: not pinned): a runtime that appears later waits in
    # `pending_capacity["runtimes"]` until an operator approves it. The lender's own least isolation ("": none).
    runtimes = models.JSONField(default=list, blank=True)
    approved_runtimes = models.JSONField(null=True, blank=True, default=None)
    lender_min_isolation = models.CharField(max_length=8, blank=True, default="")
    # The lender's terms (lending/terms.py validates them, jobs/scheduling applies them): availability windows in
    # their zone, caps below the approved capacity, allowed projects, the longest job; {}: none.
    lender_terms = models.JSONField(default=dict, blank=True)
    # 0–100 from Euler's own records over a rolling window (lending/reliability.py); null: not computed yet.
    reliability = models.FloatField(null=True, blank=True, default=None)
    reliability_at = models.DateTimeField(null=True, blank=True, default=None)
    # Kept by the scheduler (jobs app) as it places and frees attempts; shown as free capacity.
    allocated_cpu_milli = models.BigIntegerField(default=0)
    allocated_memory_bytes = models.BigIntegerField(default=0)
    allocated_disk_bytes = models.BigIntegerField(default=0)
    allocated_gpus = models.JSONField(default=list, blank=True)  # GPU UUIDs in use
    # The node credential (euler_node_…): a lookup prefix in clear and the SHA-256 of the whole secret.
    credential_lookup = models.CharField(max_length=16, unique=True, null=True, blank=True)
    credential_digest = models.CharField(max_length=64, blank=True, default="")
    enrolled_at = models.DateTimeField(auto_now_add=True)
    approved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["approval", "online", "last_heartbeat_at"], name="node_liveness")]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_count(self) -> int:
        return len(self.gpus or [])


class EnrollmentToken(models.Model):
    """One-time, expiring: a project's token enrolls a node that project owns; a staff token a platform node."""

    project = models.ForeignKey(
        "quotas.Project", null=True, blank=True, on_delete=models.CASCADE, related_name="enrollment_tokens"
    )
    lookup = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    trust = models.CharField(max_length=10, choices=TrustLevel.choices, default=TrustLevel.UNTRUSTED)
    region = models.CharField(max_length=63, blank=True, default="")
    labels = models.JSONField(default=dict, blank=True)
    label = models.CharField(max_length=100, blank=True, default="")
    # Development only (`make up`): the node is approved as soon as it enrolls.
    auto_approve = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"euler_enroll_{self.lookup}…"


class NodeEvent(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    message = models.CharField(max_length=1000, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["node", "-created_at"]),
            models.Index(fields=["created_at"], name="nodeevent_created"),  # retention, oldest first
        ]

    def __str__(self) -> str:
        return f"{self.node_id} {self.kind}"
