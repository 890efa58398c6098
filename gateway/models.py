"""One row per invocation through the gateway, bulk-inserted off the hot path by the recorder."""

from __future__ import annotations

from django.db import models


class Invocation(models.Model):
    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="invocations")
    instance = models.ForeignKey("agents.AgentInstance", null=True, blank=True, on_delete=models.SET_NULL)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=500)
    status = models.PositiveSmallIntegerField()
    latency_ms = models.FloatField()
    ttfb_ms = models.FloatField(null=True, blank=True)
    bytes_in = models.BigIntegerField(default=0)
    bytes_out = models.BigIntegerField(default=0)
    error = models.CharField(max_length=200, blank=True, default="")
    request_id = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["agent", "created_at"])]
