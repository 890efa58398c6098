"""Services (issue 38): a spec with replicas, fronted by an agent of the same name.

A replica is a job (jobs.Job with `service_port` set, no retries, the longest job timeout): the scheduler, the
node agent, limits, logs, usage and quotas treat it as any job. The service's agent (agents.Agent with
`service_managed`) has one instance per replica that has passed its readiness probe.
"""

from __future__ import annotations

from django.db import models

from euler.crypto import EncryptedField


class ReplicaState(models.TextChoices):
    PENDING = "pending", "Pending"  # its job is queued, assigned or starting: no instance yet
    PROBING = "probing", "Probing"  # running; its instance exists but the readiness probe has not passed
    READY = "ready", "Ready"  # in the gateway's rotation
    DRAINING = "draining", "Draining"  # out of the rotation; calls in flight finish; then its job is cancelled
    STOPPING = "stopping", "Stopping"  # its job was cancelled; the node stops the container
    ENDED = "ended", "Ended"


LIVE = frozenset({ReplicaState.PENDING, ReplicaState.PROBING, ReplicaState.READY})


class Service(models.Model):
    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="services")
    name = models.CharField(max_length=63)
    agent = models.OneToOneField("agents.Agent", null=True, on_delete=models.SET_NULL, related_name="service")
    port = models.IntegerField()
    min_replicas = models.IntegerField(default=1)
    max_replicas = models.IntegerField(default=1)
    replicas = models.IntegerField(default=1)  # what the controller keeps now (scale, autoscaler), min..max
    target_concurrency = models.IntegerField(default=10)
    scale_to_zero_after_seconds = models.IntegerField(null=True, blank=True)
    probe = models.JSONField(default=dict)  # {"path", "interval_seconds", "timeout_seconds", "failures"}
    revision = models.IntegerField(default=1)  # the revision the replicas are rolled to
    stable_revision = models.IntegerField(null=True, blank=True)  # the last revision that was fully ready
    rollout = models.CharField(max_length=16, blank=True, default="")  # "", rolling, rolled_back
    message = models.CharField(max_length=1000, blank=True, default="")  # why the controller cannot go on
    deleting = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="service_name_unique_per_project")]

    def __str__(self) -> str:
        return f"service {self.name} ({self.project_id})"


class ServiceRevision(models.Model):
    """One version of what a replica runs: the job part of the spec (image, command, resources, placement)."""

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="revisions")
    number = models.IntegerField()
    spec = models.JSONField()  # jobs.validation fields, without env
    env = EncryptedField(null=True, blank=True)  # write-only, like a job's
    spec_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["service_id", "number"]
        constraints = [models.UniqueConstraint(fields=["service", "number"], name="service_revision_number")]

    def __str__(self) -> str:
        return f"{self.service_id} r{self.number}"


class Replica(models.Model):
    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="replica_set")
    revision = models.IntegerField()
    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.SET_NULL, related_name="replica")
    attempt_id = models.BigIntegerField(null=True, blank=True)  # the attempt its instance reaches
    instance = models.OneToOneField(
        "agents.AgentInstance", null=True, blank=True, on_delete=models.SET_NULL, related_name="replica"
    )
    state = models.CharField(max_length=10, choices=ReplicaState.choices, default=ReplicaState.PENDING)
    reason = models.CharField(max_length=200, blank=True, default="")
    node_name = models.CharField(max_length=63, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    drain_started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["service_id", "id"]
        indexes = [models.Index(fields=["service", "state"], name="replica_service_state")]

    def __str__(self) -> str:
        return f"replica {self.pk} of {self.service_id} ({self.state})"


class ServiceEvent(models.Model):
    """What the controller did and why (scaled, replaced, rolled out, rolled back): the console's scaling events."""

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32)
    message = models.CharField(max_length=1000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.service_id}: {self.kind}"
