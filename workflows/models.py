"""Schedules (cron + time zone + job spec) and their runs; webhooks, their deliveries and each try."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from euler.crypto import EncryptedField


class Overlap(models.TextChoices):
    SKIP = "skip", "Skip the tick while a previous run is active"
    ALLOW = "allow", "Run alongside previous runs"
    CANCEL_PREVIOUS = "cancel_previous", "Cancel active previous runs, then run"


class Schedule(models.Model):
    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="schedules")
    name = models.CharField(max_length=100)
    cron = models.CharField(max_length=100)
    timezone = models.CharField(max_length=64, default="UTC")
    spec = models.JSONField()  # a validated job submission without its env (jobs.validation)
    env = EncryptedField(null=True, blank=True)  # write-only, like a job's
    overlap = models.CharField(max_length=16, choices=Overlap.choices, default=Overlap.SKIP)
    enabled = models.BooleanField(default=True)
    next_tick_at = models.DateTimeField(null=True, blank=True)  # UTC; None: disabled or never fires again
    last_tick_at = models.DateTimeField(null=True, blank=True)
    # The shortest gap between two ticks of its cron, in seconds (None: it fires at most once): the project's
    # limits (quotas.Quota: minimum period, runs per minute) are checked against it (workflows/fairness.py).
    min_period = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="schedule_project_name")]
        indexes = [models.Index(fields=["enabled", "next_tick_at"], name="schedule_due")]

    def __str__(self) -> str:
        return f"schedule {self.name} ({self.cron} {self.timezone})"


class RunOutcome(models.TextChoices):
    SUBMITTED = "submitted", "A job was submitted"
    SKIPPED = "skipped", "Skipped: a previous run was still active"
    REFUSED = "refused", "The submission was refused (quota, image policy)"


class ScheduleRun(models.Model):
    """One per (schedule, tick): the unique constraint makes a tick run once, whatever runs the tick task."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="runs")
    tick = models.DateTimeField()
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    outcome = models.CharField(max_length=10, choices=RunOutcome.choices)
    message = models.CharField(max_length=1000, blank=True, default="")
    catch_up = models.BooleanField(default=False)  # ran after the platform missed ticks
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-tick"]
        indexes = [models.Index(fields=["created_at"], name="schedulerun_created")]  # retention
        constraints = [models.UniqueConstraint(fields=["schedule", "tick"], name="schedulerun_schedule_tick")]

    def __str__(self) -> str:
        return f"run of schedule {self.schedule_id} at {self.tick:%Y-%m-%d %H:%M}"


class Webhook(models.Model):
    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="webhooks")
    url = models.CharField(max_length=2000)
    events = models.JSONField()  # event names and groups (workflows/events.py)
    secret = EncryptedField()  # shown once at creation
    description = models.CharField(max_length=200, blank=True, default="")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"webhook {self.pk} -> {self.url}"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Waiting for its next try"
    SENDING = "sending", "A try is in flight"
    SUCCEEDED = "succeeded", "The receiver answered 2xx"
    FAILED = "failed", "Every try failed"


class Delivery(models.Model):
    hook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    key = models.CharField(max_length=64)  # event:<JobEvent id>, or redeliver:<id>:<n>
    event_type = models.CharField(max_length=40)
    payload = models.JSONField()
    state = models.CharField(max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    redelivery_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["hook", "key"], name="delivery_hook_key")]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="delivery_due")]

    def __str__(self) -> str:
        return f"delivery {self.pk} of hook {self.hook_id} ({self.state})"


class DeliveryTry(models.Model):
    """The delivery log: one row per HTTP try."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="tries")
    number = models.IntegerField()
    status_code = models.IntegerField(null=True, blank=True)
    latency_ms = models.IntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True, default="")
    response_excerpt = models.CharField(max_length=512, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["delivery_id", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="deliverytry_number")]

    def __str__(self) -> str:
        return f"try {self.number} of delivery {self.delivery_id}: {self.status_code or self.error}"


class DispatchCursor(models.Model):
    """How far a project's job events have been turned into deliveries (one row per project with enabled hooks)."""

    project = models.OneToOneField("quotas.Project", null=True, on_delete=models.CASCADE, related_name="+")
    last_event_id = models.BigIntegerField(default=0)  # every event up to this one is settled and dispatched
    seen_event_id = models.BigIntegerField(default=0)  # the newest event dispatched (those between: read again)

    def __str__(self) -> str:
        return f"webhook dispatch cursor of project {self.project_id} at event {self.last_event_id}"
