"""Job arrays (one spec, N tasks that are each a real Job) and dependencies between jobs and arrays."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class JobArray(models.Model):
    """N tasks of one spec. Each task is a Job (`Job.array`, `Job.array_index`) with its own attempts, logs and
    exit code; the array holds what is shared: how many, how many may run at once, and whether it still waits."""

    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="job_arrays")
    name = models.CharField(max_length=100)
    count = models.IntegerField()
    parallelism = models.IntegerField(null=True, blank=True)  # None: no limit of its own
    # True while the array's own dependencies are unmet: no task is released until they are.
    held = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"], name="jobarray_project_newest")]

    def __str__(self) -> str:
        return f"array {self.pk} {self.name} ({self.count} tasks)"


class Condition(models.TextChoices):
    SUCCEEDED = "succeeded", "The dependency succeeded (every task, for an array)"
    ENDED = "ended", "The dependency ended, however (every task, for an array)"


class DepState(models.TextChoices):
    PENDING = "pending", "Pending"
    MET = "met", "Met"
    NEVER = "never", "Can never be met"


class Dependency(models.Model):
    """`job` or `array` waits until `on_job` or `on_array` meets `condition`; `state` records the verdict once."""

    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="dependencies")
    array = models.ForeignKey(JobArray, null=True, blank=True, on_delete=models.CASCADE, related_name="dependencies")
    on_job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="dependents")
    on_array = models.ForeignKey(JobArray, null=True, blank=True, on_delete=models.CASCADE, related_name="dependents")
    condition = models.CharField(max_length=10, choices=Condition.choices, default=Condition.SUCCEEDED)
    state = models.CharField(max_length=8, choices=DepState.choices, default=DepState.PENDING)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["on_job"], name="dep_on_job", condition=models.Q(state="pending")),
            models.Index(fields=["on_array"], name="dep_on_array", condition=models.Q(state="pending")),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(job__isnull=True) ^ models.Q(array__isnull=True), name="dep_one_waiter"
            ),
            models.CheckConstraint(
                condition=models.Q(on_job__isnull=True) ^ models.Q(on_array__isnull=True), name="dep_one_target"
            ),
        ]

    def __str__(self) -> str:
        waiter = f"job {self.job_id}" if self.job_id else f"array {self.array_id}"
        target = f"job {self.on_job_id}" if self.on_job_id else f"array {self.on_array_id}"
        return f"{waiter} after {target} {self.condition} ({self.state})"
