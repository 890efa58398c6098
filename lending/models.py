"""What lent machines ran and for whom: one ledger entry per ended attempt. (A machine's terms and reliability
score live on the node: nodes.Node.lender_terms, .reliability, read by the scheduler.)"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class LedgerEntry(models.Model):
    """One ended attempt's figures, written once in the transaction that ended it (unique per attempt).

    Figures are integers (milliseconds of the resource), so every total is an exact sum of its entries.
    """

    attempt = models.OneToOneField("jobs.Attempt", null=True, on_delete=models.SET_NULL, related_name="ledger_entry")
    attempt_ref = models.BigIntegerField(unique=True)  # the attempt's id, kept when retention deletes the attempt
    job_ref = models.BigIntegerField()
    project = models.ForeignKey("quotas.Project", null=True, on_delete=models.SET_NULL, related_name="+")
    project_name = models.CharField(max_length=100, blank=True, default="")
    node = models.ForeignKey("nodes.Node", null=True, on_delete=models.SET_NULL, related_name="ledger_entries")
    node_name = models.CharField(max_length=63, blank=True, default="")
    # The lender: who created the enrollment token the node enrolled with (None: unknown or deleted).
    lender = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    lender_name = models.CharField(max_length=150, blank=True, default="")
    outcome = models.CharField(max_length=10)  # the attempt's end state: succeeded, failed, cancelled, lost
    reason = models.CharField(max_length=32, blank=True, default="")  # exited, timeout, cancelled, lost, budget…
    credited = models.BooleanField()  # ended normally or stopped by Euler; False: lost with its node
    started_at = models.DateTimeField(null=True)
    ended_at = models.DateTimeField()
    day = models.DateField()  # the UTC day it ended on: totals per day and month group by it
    run_ms = models.BigIntegerField()  # wall time it ran (0: never started)
    cpu_ms = models.BigIntegerField()  # core-milliseconds
    gpu_ms = models.BigIntegerField()  # GPU-milliseconds
    memory_gib_ms = models.BigIntegerField()  # GiB-milliseconds of memory held
    disk_gib_ms = models.BigIntegerField()  # GiB-milliseconds of disk held
    gpu_fault = models.BooleanField(default=False)  # ended because a GPU failed under it
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-ended_at", "-id"]
        indexes = [
            models.Index(fields=["day"], name="ledger_day"),
            models.Index(fields=["lender", "day"], name="ledger_lender_day"),
            models.Index(fields=["node", "day"], name="ledger_node_day"),
            models.Index(fields=["project", "day"], name="ledger_project_day"),
        ]

    def __str__(self) -> str:
        return f"ledger: attempt {self.attempt_ref} on {self.node_name} ({self.outcome})"
