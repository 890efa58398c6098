"""Operators' view of jobs: read-only rows (env never shown), cancel and retry through jobs.services."""

from __future__ import annotations

from django.contrib import admin, messages

from euler.errors import EulerError
from jobs import services
from jobs.models import Attempt, Job, JobEvent, Preemption

_JOB_FIELDS = [
    "project", "name", "state", "image", "command", "has_env", "cpu_milli", "memory_bytes", "disk_bytes",
    "network", "gpu_count", "gpu_model", "gpu_min_memory_bytes", "timeout_seconds", "region", "node_selector", "max_retries", "retry_on", "pool", "min_trust",
    "isolation", "current_attempt", "retries_used", "not_before", "pending_reason", "exit_code", "reason", "created_by",
    "created_at", "queued_at", "updated_at", "ended_at", "priority", "priority_class", "priority_value", "preempt_immune",
]  # fmt: skip
_ATTEMPT_FIELDS = [
    "number", "node_name", "state", "exit_code", "reason", "message", "gpu_uuids", "gpu_stats", "cpu_milli", "memory_bytes",
    "disk_bytes", "created_at", "started_at", "ended_at", "deadline_at", "stop_reason", "log_bytes", "log_truncated",
    "runtime", "isolation",
]  # fmt: skip


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    fields = _ATTEMPT_FIELDS
    readonly_fields = _ATTEMPT_FIELDS


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    fields = ["created_at", "from_state", "to_state", "reason", "message", "attempt"]
    readonly_fields = fields


def _each(request, queryset, operation, verb: str) -> None:
    done = 0
    for job in queryset:
        try:
            operation(job_id=job.pk, project=job.project, by=request.user)
            done += 1
        except EulerError as exc:
            messages.warning(request, f"job {job.pk}: {exc.message}")
    messages.info(request, f"{verb} {done} job(s).")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "project", "state", "priority_class", "image", "gpu_count", "created_at", "ended_at"]
    list_filter = ["state", "pool", "min_trust", "priority_class"]
    search_fields = ["name", "image", "project__name"]
    fields = _JOB_FIELDS  # env is write-only: not a field here
    readonly_fields = _JOB_FIELDS
    inlines = [AttemptInline, JobEventInline]
    actions = ["cancel", "retry"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("env")

    def has_add_permission(self, request):
        return False

    @admin.action(description="Cancel the selected jobs")
    def cancel(self, request, queryset):
        _each(request, queryset, services.job_cancel, "Cancelled")

    @admin.action(description="Retry the selected ended jobs")
    def retry(self, request, queryset):
        _each(request, queryset, services.job_retry, "Requeued")


@admin.register(Preemption)
class PreemptionAdmin(admin.ModelAdmin):
    """Who preempted whom, where and when: read-only (the scheduler writes these)."""

    list_display = ["created_at", "preemptor", "preemptor_class", "victim", "victim_value", "node_name"]
    search_fields = ["node_name", "preemptor_class"]
    fields = ["created_at", "preemptor", "preemptor_class", "preemptor_value", "victim", "victim_value",
              "victim_attempt", "node", "node_name"]  # fmt: skip
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
