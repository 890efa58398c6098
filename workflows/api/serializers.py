"""Schedule and webhook API shapes: strict input (unknown fields 400), output without secrets."""

from __future__ import annotations

from rest_framework import serializers

from quotas.api.base import StrictSerializer
from workflows.models import Delivery, DeliveryTry, Overlap, Schedule, ScheduleRun, Webhook

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class ScheduleIn(StrictSerializer):
    name = serializers.RegexField(_NAME, error_messages={"invalid": "name is 1-100 letters, digits, '.', '_', '-'."})
    cron = serializers.CharField(max_length=100)
    timezone = serializers.CharField(max_length=64, default="UTC")
    job = serializers.JSONField(help_text="a job submission, as POST /api/v1/jobs takes it")
    overlap = serializers.ChoiceField(choices=Overlap.choices, default=Overlap.SKIP)
    enabled = serializers.BooleanField(default=True)


class SchedulePatchIn(StrictSerializer):
    cron = serializers.CharField(max_length=100, required=False)
    timezone = serializers.CharField(max_length=64, required=False)
    job = serializers.JSONField(required=False)
    overlap = serializers.ChoiceField(choices=Overlap.choices, required=False)
    enabled = serializers.BooleanField(required=False)


class ScheduleOut(serializers.ModelSerializer):
    job = serializers.SerializerMethodField()
    has_env = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = Schedule
        fields = [
            "id", "name", "cron", "timezone", "job", "has_env", "overlap", "enabled", "next_tick_at", "last_tick_at",
            "created_by", "created_at", "updated_at",
        ]  # fmt: skip

    def get_job(self, obj) -> dict:
        return obj.spec

    def get_has_env(self, obj) -> bool:
        return bool(obj.env)


class ScheduleRunOut(serializers.ModelSerializer):
    job = serializers.IntegerField(source="job_id", allow_null=True)

    class Meta:
        model = ScheduleRun
        fields = ["id", "tick", "job", "outcome", "message", "catch_up", "created_at"]


class WebhookIn(StrictSerializer):
    url = serializers.CharField(max_length=2000)
    events = serializers.JSONField(help_text="event names: job.ended, job.failed, job.state_changed, job.<state>")
    description = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


class WebhookOut(serializers.ModelSerializer):
    class Meta:
        model = Webhook
        fields = ["id", "url", "events", "description", "enabled", "created_at"]


class WebhookCreatedOut(WebhookOut):
    secret = serializers.CharField(help_text="shown once: verify Euler-Signature with it")

    class Meta(WebhookOut.Meta):
        fields = [*WebhookOut.Meta.fields, "secret"]


class DeliveryTryOut(serializers.ModelSerializer):
    class Meta:
        model = DeliveryTry
        fields = ["number", "status_code", "latency_ms", "error", "response_excerpt", "created_at"]


class DeliveryOut(serializers.ModelSerializer):
    tries = DeliveryTryOut(many=True, read_only=True)
    redelivery_of = serializers.IntegerField(source="redelivery_of_id", allow_null=True)

    class Meta:
        model = Delivery
        fields = [
            "id", "event_type", "state", "attempts", "next_attempt_at", "redelivery_of", "payload", "tries",
            "created_at", "updated_at",
        ]  # fmt: skip
