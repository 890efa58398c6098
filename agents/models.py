"""Registered external agents (per project, by name) and their upstream instances."""

from __future__ import annotations

from django.db import models

from euler.crypto import EncryptedField


class Health(models.TextChoices):
    UNKNOWN = "unknown", "Unknown"
    HEALTHY = "healthy", "Healthy"
    UNHEALTHY = "unhealthy", "Unhealthy"


ROUTABLE = frozenset({Health.UNKNOWN, Health.HEALTHY})


class Agent(models.Model):
    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=63)
    description = models.TextField(blank=True, default="")
    health_path = models.CharField(max_length=255, default="/health")
    health_interval_s = models.PositiveIntegerField(default=10)
    health_timeout_s = models.FloatField(default=2.0)
    connect_timeout_s = models.FloatField(default=5.0)
    response_timeout_s = models.FloatField(default=60.0)
    idle_timeout_s = models.FloatField(default=300.0)
    auth_header_name = models.CharField(max_length=100, blank=True, default="")
    auth_header_value = EncryptedField(null=True, blank=True)
    # The agent of a service (services.models.Service): its instances are the service's ready replicas, written by
    # the services controller only; the agents API refuses to change it (409 managed_by_service).
    service_managed = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="agent_name_unique_per_project")]

    def __str__(self) -> str:
        return f"{self.name} ({self.project_id})"

    @property
    def has_auth_header(self) -> bool:
        return bool(self.auth_header_name and self.auth_header_value)


class AgentInstance(models.Model):
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="instances")
    base_url = models.CharField(max_length=2000)
    weight = models.PositiveIntegerField(default=1)
    enabled = models.BooleanField(default=True)
    health = models.CharField(max_length=10, choices=Health.choices, default=Health.UNKNOWN)
    last_check_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    consecutive_successes = models.PositiveIntegerField(default=0)
    consecutive_failures = models.PositiveIntegerField(default=0)
    latency_ms = models.FloatField(null=True, blank=True, help_text="Rolling (EWMA) health-check latency")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["enabled", "last_check_at"])]

    def __str__(self) -> str:
        return f"{self.base_url} (weight {self.weight}, {self.health})"
