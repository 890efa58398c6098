"""Jobs, their attempts (one per placement), the job event log and stored log chunks."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from euler.crypto import EncryptedField
from jobs.states import AttemptState, Isolation, JobState, MinTrust, Network, Pool


def _default_retry_on() -> list[str]:
    return ["lost"]


class Job(models.Model):
    project = models.ForeignKey("quotas.Project", on_delete=models.CASCADE, related_name="jobs")
    name = models.CharField(max_length=100)
    image = models.CharField(max_length=512)
    command = models.JSONField()
    env = EncryptedField(null=True, blank=True)  # write-only; decrypted only for a platform node's assignment
    has_env = models.BooleanField(default=False)
    cpu_milli = models.IntegerField()
    memory_bytes = models.BigIntegerField()
    # Writable layer and anything else the job writes on the node; 0 (jobs older than the field): not limited.
    disk_bytes = models.BigIntegerField(default=0)
    network = models.CharField(max_length=8, choices=Network.choices, default=Network.DEFAULT)
    isolation = models.CharField(max_length=8, choices=Isolation.choices, default=Isolation.DEFAULT)
    gpu_count = models.IntegerField(default=0)
    # A typed GPU request (nodeagent/gpumatch.py): a glob over the NVML name, and the least memory per GPU.
    gpu_model = models.CharField(max_length=128, blank=True, default="")
    gpu_min_memory_bytes = models.BigIntegerField(default=0)
    timeout_seconds = models.IntegerField()
    # Every stop (cancel, timeout, reclaim, preemption, budget): SIGTERM, this many seconds, then SIGKILL
    # (jobs/stopping.py; at most EULER_MAX_STOP_GRACE). A timeout warning: `warn_signal` this long before the
    # timeout (0: none).
    stop_grace_seconds = models.IntegerField(default=30)
    warn_before_timeout_seconds = models.IntegerField(default=0)
    warn_signal = models.CharField(max_length=10, default="SIGUSR1")
    region = models.CharField(max_length=63, blank=True, default="")
    node_selector = models.JSONField(default=dict, blank=True)
    max_retries = models.IntegerField(default=1)
    retry_on = models.JSONField(default=_default_retry_on)  # endings and exit codes (jobs/retrypolicy.py)
    retry_backoff = models.JSONField(null=True, blank=True)  # {"initial", "factor", "max"}; None: the defaults
    pool = models.CharField(max_length=8, choices=Pool.choices, default=Pool.ANY)
    min_trust = models.CharField(max_length=10, choices=MinTrust.choices, default=MinTrust.COMMUNITY)
    priority = models.SmallIntegerField(default=0)  # -100..100: orders the project's own queue, then FIFO
    min_reliability = models.FloatField(default=0.0)  # 0–100: only nodes whose reliability score is at least this
    # Outputs and inputs (jobs/outputs): {"paths": [...], "max_bytes": N} or None; [{"job", "path", "to"}].
    outputs = models.JSONField(null=True, blank=True)
    inputs_from = models.JSONField(default=list, blank=True)
    outputs_truncated = models.BooleanField(default=False)  # some output was refused or lost: why in the events
    outputs_reason = models.CharField(max_length=500, blank=True, default="")
    # A checkpoint directory (jobs/checkpoints): {"path", "interval_seconds", "keep_last"} or None.
    checkpoint = models.JSONField(null=True, blank=True)
    # A task of a job array (jobs.workflow_models): its index, 0..count-1, reaches the container as EULER_ARRAY_INDEX.
    array = models.ForeignKey("jobs.JobArray", null=True, blank=True, on_delete=models.CASCADE, related_name="tasks")
    array_index = models.IntegerField(null=True, blank=True)

    state = models.CharField(max_length=10, choices=JobState.choices, default=JobState.QUEUED)
    current_attempt = models.ForeignKey(
        "jobs.Attempt", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    retries_used = models.IntegerField(default=0)  # automatic retries since submit or the last manual retry
    not_before = models.DateTimeField(null=True, blank=True)  # retry backoff
    pending_reason = models.CharField(max_length=1000, blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    reason = models.CharField(max_length=32, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "-created_at"], name="job_project_newest"),
            models.Index(fields=["state", "queued_at"], name="job_state_queued"),
            # Retention walks ended jobs oldest first (jobs/retention.py): only ended rows are indexed.
            models.Index(fields=["ended_at", "id"], name="job_ended", condition=models.Q(ended_at__isnull=False)),
            # An array's counts per state, and the next waiting tasks to release, without reading the others.
            models.Index(
                fields=["array", "state", "array_index"],
                name="job_array_state",
                condition=models.Q(array__isnull=False),
            ),
        ]
        constraints = [models.UniqueConstraint(fields=["array", "array_index"], name="job_array_index")]

    def __str__(self) -> str:
        return f"job {self.pk} {self.name} ({self.state})"


class Attempt(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts")
    number = models.IntegerField()
    node = models.ForeignKey("nodes.Node", null=True, on_delete=models.SET_NULL, related_name="attempts")
    node_name = models.CharField(max_length=63, blank=True, default="")  # kept if the node is deleted
    # What the placement holds on the node, copied from the job: allocation is the sum over active attempts.
    cpu_milli = models.IntegerField()
    memory_bytes = models.BigIntegerField()
    disk_bytes = models.BigIntegerField(default=0)
    gpu_uuids = models.JSONField(default=list, blank=True)
    # Per GPU, what the agent sampled while the attempt ran (protocol.GpuStat dicts), from its `ended` report.
    gpu_stats = models.JSONField(default=list, blank=True)
    state = models.CharField(max_length=10, choices=AttemptState.choices, default=AttemptState.ASSIGNED)
    exit_code = models.IntegerField(null=True, blank=True)
    reason = models.CharField(max_length=32, blank=True, default="")
    message = models.CharField(max_length=2000, blank=True, default="")
    container_id = models.CharField(max_length=128, blank=True, default="")
    # The runtime the scheduler chose (jobs/scheduling/isolation.py), then the one the node says it started the
    # container with; `isolation` what the job needed on that node (runc | sandbox), which the agent checks.
    runtime = models.CharField(max_length=63, blank=True, default="")
    isolation = models.CharField(max_length=8, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)  # server backstop: timeout + grace
    delivered_at = models.DateTimeField(null=True, blank=True)  # handed to the node through the poll
    stop_reason = models.CharField(max_length=32, blank=True, default="")  # the node must stop the container
    stop_sent_at = models.DateTimeField(null=True, blank=True)
    # How the stop asked (jobs/stopping.py) ends the attempt: its grace (None: the job's), whether its job goes back
    # to the queue without spending a retry, whether it counts as a failure, and who or what asked.
    stop_grace = models.IntegerField(null=True, blank=True)
    stop_requeue = models.BooleanField(default=False)
    stop_failure = models.BooleanField(default=False)
    stop_by = models.CharField(max_length=150, blank=True, default="")
    log_bytes = models.BigIntegerField(default=0)
    log_truncated = models.BooleanField(default=False)
    # Usage is booked up to this instant (compare-and-set), so each second is counted exactly once.
    metered_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job_id", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="attempt_job_number")]
        indexes = [
            models.Index(fields=["node", "state"], name="attempt_node_state"),
            models.Index(fields=["state", "deadline_at"], name="attempt_state_deadline"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.pk} (job {self.job_id} #{self.number}, {self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in (AttemptState.ASSIGNED, AttemptState.RUNNING)


class JobEvent(models.Model):
    """One row per job transition (and per notable attempt fact)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    attempt = models.ForeignKey(Attempt, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    from_state = models.CharField(max_length=10, blank=True, default="")
    to_state = models.CharField(max_length=10)
    reason = models.CharField(max_length=32, blank=True, default="")
    message = models.CharField(max_length=1000, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["job", "created_at"], name="jobevent_job_time")]

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.from_state} -> {self.to_state}"


class LogChunk(models.Model):
    """Stored idempotently: the agent may send a chunk twice, `(attempt, seq)` keeps one."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="log_chunks")
    seq = models.IntegerField()
    offset = models.BigIntegerField()
    stream = models.CharField(max_length=6)
    data = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["attempt_id", "seq"]
        constraints = [models.UniqueConstraint(fields=["attempt", "seq"], name="logchunk_attempt_seq")]

    def __str__(self) -> str:
        return f"log {self.attempt_id}#{self.seq}"


class LogArchive(models.Model):
    """An ended attempt's log, compacted (jobs.logstore): its chunks' seq, offset, stream and text in one zlib blob.

    Readers see exactly the chunks they saw before compaction; LogChunk keeps only the hot logs of running and
    recently ended attempts."""

    attempt = models.OneToOneField(Attempt, primary_key=True, on_delete=models.CASCADE, related_name="log_archive")
    chunks = models.IntegerField()
    raw_bytes = models.BigIntegerField()  # UTF-8 bytes of text before compression
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"log archive of attempt {self.attempt_id} ({self.chunks} chunks)"


from jobs.workflow_models import Condition, Dependency, DepState, JobArray  # noqa: E402, F401  (registered here)
