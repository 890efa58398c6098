"""A job's checkpoints: blobs stored once per job by content (sha256), and checkpoints that name them as one set."""

from __future__ import annotations

from django.db import models


class CheckpointState(models.TextChoices):
    PENDING = "pending", "Pending"  # its blobs are being sent: never restored, never listed
    COMMITTED = "committed", "Committed"  # every blob stored and verified, committed as one set


class CheckpointBlob(models.Model):
    """One content of a job's checkpoint files. Sent once: a later checkpoint naming the same sha256 reuses it.
    `received` counts the bytes held (chunked uploads); `complete` once the sha256 matched."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="+")
    sha256 = models.CharField(max_length=64)
    size = models.BigIntegerField()
    storage_key = models.CharField(max_length=300)
    received = models.BigIntegerField(default=0)
    complete = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "sha256"], name="ckptblob_job_sha256")]
        indexes = [models.Index(fields=["project"], name="ckptblob_project")]

    def __str__(self) -> str:
        return f"checkpoint blob {self.sha256[:12]} of job {self.job_id}"


class Checkpoint(models.Model):
    """One checkpoint of a job: `files` is [{"path", "size", "sha256"}] (paths relative to the directory)."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="checkpoints")
    attempt = models.ForeignKey("jobs.Attempt", null=True, on_delete=models.SET_NULL, related_name="+")
    attempt_number = models.IntegerField()
    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="+")
    seq = models.IntegerField()  # 1, 2, ... per job
    reason = models.CharField(max_length=16)  # periodic | stop
    state = models.CharField(max_length=10, choices=CheckpointState.choices, default=CheckpointState.PENDING)
    size = models.BigIntegerField(default=0)
    files_count = models.IntegerField(default=0)
    skipped = models.IntegerField(default=0)  # entries that were not regular files (links, devices): not kept
    files = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    committed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job_id", "-seq"]
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="checkpoint_job_seq")]
        indexes = [models.Index(fields=["job", "state", "-seq"], name="checkpoint_job_state")]

    def __str__(self) -> str:
        return f"checkpoint {self.seq} of job {self.job_id} ({self.state})"
