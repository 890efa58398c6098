"""Stored output files: one row per file an attempt declared in its manifest and the server accepted."""

from __future__ import annotations

from django.db import models


class OutputFile(models.Model):
    """A job's output file. `received` counts the bytes held (chunked uploads); `complete` once the sha256 matched.

    A job's outputs are its complete rows; a new attempt's manifest replaces an earlier attempt's files."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="output_files")
    attempt = models.ForeignKey("jobs.Attempt", null=True, on_delete=models.SET_NULL, related_name="+")
    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="+")
    path = models.CharField(max_length=1024)  # relative, '/'-separated (protocol.OutputFile.path)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    storage_key = models.CharField(max_length=300)
    received = models.BigIntegerField(default=0)
    complete = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job_id", "path"]
        constraints = [models.UniqueConstraint(fields=["attempt", "path"], name="outputfile_attempt_path")]
        indexes = [
            models.Index(fields=["job", "path"], name="outputfile_job_path"),
            models.Index(fields=["project", "complete"], name="outputfile_project"),
        ]

    def __str__(self) -> str:
        return f"output {self.path} of job {self.job_id}"
