"""Tenancy: projects, memberships, API keys, quotas and the usage ledger."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    MEMBER = "member", "Member"


class Resource(models.TextChoices):
    CPU_CORE_SECONDS = "cpu_core_seconds", "CPU core-seconds"
    GPU_SECONDS = "gpu_seconds", "GPU-seconds"
    INVOCATIONS = "invocations", "Invocations"


MAX_WEIGHT = 1000.0  # fair-share weights are in (0, MAX_WEIGHT]
MAX_CLASS_VALUE = 1_000_000  # priority class values are in [-MAX_CLASS_VALUE, MAX_CLASS_VALUE]


class PriorityClass(models.Model):
    """A priority class, set by the operator: a higher value places first and may preempt lower ones
    (jobs/scheduling/preemption.py). A job keeps the name and value it was submitted with."""

    name = models.SlugField(max_length=63, unique=True)
    value = models.IntegerField(validators=[MinValueValidator(-MAX_CLASS_VALUE), MaxValueValidator(MAX_CLASS_VALUE)])
    description = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-value", "name"]
        verbose_name_plural = "priority classes"

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"


class Project(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Fair-share weight: on contended capacity the project gets weight / (sum of the waiting projects' weights).
    weight = models.FloatField(default=1.0, validators=[MinValueValidator(0.001), MaxValueValidator(MAX_WEIGHT)])
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")
    # Priority classes: a job without `priority_class` gets the default (none: value 0); a job may ask for any class
    # up to the maximum (none: up to the default).
    default_priority_class = models.ForeignKey(
        PriorityClass, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    max_priority_class = models.ForeignKey(
        PriorityClass, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class ApiKey(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    label = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    # No creator: made by an operator (the `createapikey` command); else it acts with at most its creator's role.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Gateway calls per minute this key may make (sliding window, as LiteLLM's rpm_limit); blank: no limit.
    rpm_limit = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"euler_pk_{self.prefix}… ({self.label or 'no label'})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


def free_output_bytes() -> int:
    from django.conf import settings

    return settings.EULER_FREE_QUOTA_OUTPUT_BYTES


def free_max_schedules() -> int:
    from django.conf import settings

    return settings.EULER_FREE_QUOTA_SCHEDULES


def free_schedule_min_period() -> int:
    from django.conf import settings

    return settings.EULER_FREE_QUOTA_SCHEDULE_MIN_PERIOD


def free_schedule_runs_per_minute() -> int:
    from django.conf import settings

    return settings.EULER_FREE_QUOTA_SCHEDULE_RUNS_PER_MINUTE


class Quota(models.Model):
    """Budgets per period (a calendar month, UTC); concurrency and key counts are plain limits."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="quota")
    cpu_core_seconds = models.BigIntegerField()
    gpu_seconds = models.BigIntegerField()
    invocations = models.BigIntegerField()
    max_concurrent_jobs = models.IntegerField()
    max_api_keys = models.IntegerField()
    # Upstream calls the gateway relays for the project at once; blank: EULER_GATEWAY_MAX_CONCURRENT.
    max_concurrent_invocations = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    # Bytes of job outputs the project may keep stored at once (jobs/outputs): past it, files are refused.
    output_bytes = models.BigIntegerField(default=free_output_bytes)
    # Schedules (workflows/limits.py): how many the project may keep, the shortest period between two ticks of
    # one schedule (seconds), and the runs per minute all its enabled schedules may add up to at their busiest.
    max_schedules = models.PositiveIntegerField(default=free_max_schedules)
    schedule_min_period = models.PositiveIntegerField(
        default=free_schedule_min_period, validators=[MinValueValidator(60)]
    )
    schedule_runs_per_minute = models.PositiveIntegerField(default=free_schedule_runs_per_minute)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"quota of {self.project}"


class UsageEntry(models.Model):
    """The usage ledger: one row per project, day, resource and agent (blank for jobs)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="usage")
    day = models.DateField()
    resource = models.CharField(max_length=32, choices=Resource.choices)
    agent_name = models.CharField(max_length=100, blank=True, default="")
    amount = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "day", "resource", "agent_name"], name="usage_entry_unique")
        ]
        indexes = [models.Index(fields=["project", "day"])]


class OidcIdentity(models.Model):
    """Links a Django user to the provider's stable subject (`sub`)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    subject = models.CharField(max_length=255, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)


class Invitation(models.Model):
    """A one-time link that lets whoever opens it join a project; only the SHA-256 of the token is kept."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    prefix = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"invitation {self.prefix}… to {self.project} ({self.role})"

    def state(self, now) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.used_at is not None:
            return "used"
        if self.expires_at <= now:
            return "expired"
        return "open"
