"""AuditEvent: one append-only row per change that matters (who, from where, on what, in which project)."""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone


class Action(models.TextChoices):
    NODE_ENROLLED = "node.enrolled"
    NODE_APPROVED = "node.approved"
    NODE_REJECTED = "node.rejected"
    NODE_TRUST_CHANGED = "node.trust_changed"
    NODE_PUBLIC_POOL_CHANGED = "node.public_pool_changed"
    NODE_DRAINED = "node.drained"
    NODE_UNDRAINED = "node.undrained"
    NODE_GPU_RESET = "node.gpu_reset"
    NODE_TERMS_CHANGED = "node.terms_changed"
    NODE_CREDENTIAL_ROTATED = "node.credential_rotated"
    NODE_CREDENTIAL_REVOKED = "node.credential_revoked"
    NODE_RECLAIMED = "node.reclaimed"
    NODE_RESUMED = "node.resumed"
    ENROLLMENT_TOKEN_CREATED = "enrollment_token.created"
    ENROLLMENT_TOKEN_REVOKED = "enrollment_token.revoked"
    API_KEY_CREATED = "api_key.created"
    API_KEY_REVOKED = "api_key.revoked"
    API_KEY_ROLE_LOWERED = "api_key.role_lowered"
    INVITATION_CREATED = "invitation.created"
    INVITATION_USED = "invitation.used"
    INVITATION_REVOKED = "invitation.revoked"
    MEMBER_ROLE_CHANGED = "member.role_changed"
    MEMBER_REMOVED = "member.removed"
    QUOTA_CHANGED = "quota.changed"
    AGENT_CREATED = "agent.created"
    AGENT_CHANGED = "agent.changed"
    AGENT_DELETED = "agent.deleted"
    JOB_CANCELLED = "job.cancelled"
    JOB_RETRIED = "job.retried"
    SCHEDULE_CREATED = "schedule.created"
    SCHEDULE_CHANGED = "schedule.changed"
    SCHEDULE_DELETED = "schedule.deleted"
    SCHEDULE_DISABLED = "schedule.disabled"  # by the platform: its creator left the project
    WEBHOOK_CREATED = "webhook.created"
    WEBHOOK_DELETED = "webhook.deleted"
    WEBHOOK_REDELIVERED = "webhook.redelivered"
    ENCRYPTION_KEYS_ROTATED = "encryption_keys.rotated"
    LOGIN_SUCCEEDED = "login.succeeded"
    LOGIN_FAILED = "login.failed"
    LOGIN_THROTTLED = "login.throttled"


class AuditEventQuerySet(models.QuerySet):
    """Events are never edited: bulk updates and deletes are refused, except the retention purge."""

    def update(self, **kwargs):
        raise TypeError("audit events are append-only")

    def delete(self):
        raise TypeError("audit events are append-only; only the retention task removes them")

    def purge(self) -> int:
        """Delete these rows (retention only)."""
        return models.QuerySet.delete(self)[0]


class AuditEvent(models.Model):
    created_at = models.DateTimeField(default=timezone.now)
    action = models.CharField(max_length=64, choices=Action.choices)
    # "user:<username>", "api_key:<prefix>", "node:<name>", "system", or "anonymous" (failed sign-in).
    actor = models.CharField(max_length=200)
    ip = models.GenericIPAddressField(null=True, blank=True)
    project = models.ForeignKey(
        "quotas.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    target = models.CharField(max_length=300, blank=True, default="")  # "<kind>:<id or name>"
    details = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "-created_at", "-id"], name="audit_project_newest"),
            models.Index(fields=["created_at"], name="audit_created"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise TypeError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("audit events are append-only; only the retention task removes them")
