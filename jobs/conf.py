"""Settings of the jobs app, read from the environment (merged into config.settings)."""

import re
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured

from euler.env import env_float, env_int, env_list, env_str
from jobs.outputs import conf as _outputs_conf
from jobs.scheduling.isolation import parse_trust_min as _parse_trust_min

# How often beat runs a scheduling pass (passes also run on submit, attempt end and node changes).
EULER_SCHEDULER_INTERVAL = env_float("EULER_SCHEDULER_INTERVAL", 2.0, minimum=0.1)
# A submit to a web process runs the scheduling pass there at once, on a thread of its own, unless more than this many
# jobs are queued (then the worker's pass alone places them, as it does anyway); 0: only the worker's pass.
EULER_SCHEDULE_ON_SUBMIT_MAX = env_int("EULER_SCHEDULE_ON_SUBMIT_MAX", 64, minimum=0, maximum=100_000)
# Queued jobs locked and placed per transaction.
EULER_SCHEDULER_BATCH = env_int("EULER_SCHEDULER_BATCH", 1000, minimum=1, maximum=100_000)
# At most this many attempts per live web process handed to nodes and not yet started (0: no limit): the
# scheduler paces a large queue by what the web tier answers instead of handing it all out at once.
EULER_SCHEDULER_HANDOVER_WINDOW = env_int("EULER_SCHEDULER_HANDOVER_WINDOW", 100, minimum=0)
# A job's disk (writable layer and whatever else it writes on the node) when the submission does not say.
EULER_JOB_DEFAULT_DISK_BYTES = env_int("EULER_JOB_DEFAULT_DISK_BYTES", 10 * 1024**3, minimum=4 * 1024**2)
# The most tasks one job array may have (an array is one request and one transaction, whatever its size).
EULER_JOB_ARRAY_MAX_COUNT = env_int("EULER_JOB_ARRAY_MAX_COUNT", 10_000, minimum=1, maximum=1_000_000)
# Default automatic retry backoff (a job's retry_backoff overrides it): base * 2**n seconds, capped, less jitter.
EULER_JOB_RETRY_BACKOFF = env_float("EULER_JOB_RETRY_BACKOFF", 2.0, minimum=0)
EULER_JOB_RETRY_BACKOFF_MAX = env_float("EULER_JOB_RETRY_BACKOFF_MAX", 300.0, minimum=0)
# Server backstop: an attempt still active this long after its timeout is failed `timeout`.
EULER_JOB_TIMEOUT_GRACE = env_int("EULER_JOB_TIMEOUT_GRACE", 60, minimum=0)
# The longest stop grace a job may ask for (`stop_grace_seconds`: SIGTERM, the grace, SIGKILL; jobs/stopping.py), and
# the longest a reclaim may give; a job asking more is refused 400 invalid_stop_grace.
EULER_MAX_STOP_GRACE = env_int("EULER_MAX_STOP_GRACE", 600, minimum=0, maximum=3600)
# Extra time an assigned attempt gets to start (image pull) before the backstop counts.
EULER_JOB_START_GRACE = env_int("EULER_JOB_START_GRACE", 900, minimum=0)
# An assignment or stop command not acted on is handed to the node again after this many seconds.
EULER_JOB_REDELIVER_AFTER = env_float("EULER_JOB_REDELIVER_AFTER", 30.0, minimum=1)
# A running attempt that its node's heartbeats stop listing for this long is lost (its container vanished).
EULER_JOB_MISSING_GRACE = env_float("EULER_JOB_MISSING_GRACE", 20.0, minimum=1)
# A queued job waiting longer than this (seconds) reserves the node it fits best, so small jobs cannot starve it.
EULER_SCHEDULER_RESERVE_AFTER = env_float("EULER_SCHEDULER_RESERVE_AFTER", 300.0, minimum=0)
# Preemption by priority class (jobs/scheduling/preemption.py): a running job is preempted only after it has run this
# long (seconds), and at most this many times an hour (after that, not again until it ends; 0: no preemption).
EULER_PREEMPT_MIN_RUN_SECONDS = env_float("EULER_PREEMPT_MIN_RUN_SECONDS", 120.0, minimum=0)
EULER_PREEMPT_MAX_PER_HOUR = env_int("EULER_PREEMPT_MAX_PER_HOUR", 3, minimum=0, maximum=1000)
# A node freed by preemption stays held for its preemptor this long (seconds) after its last victim stopped.
EULER_PREEMPT_CLAIM_SECONDS = env_float("EULER_PREEMPT_CLAIM_SECONDS", 60.0, minimum=1)
# Fair share blends in decayed recent usage from the ledger with this half-life (seconds); 0: running holdings only.
EULER_FAIRSHARE_HALF_LIFE = env_float("EULER_FAIRSHARE_HALF_LIFE", 0.0, minimum=0)
# Image registries that jobs may name although the image policy would refuse them (an IP address, a local-only
# name, a name that resolves to a private address): `host` (every port) or `host:port`, comma-separated.
EULER_ALLOWED_REGISTRIES = env_list("EULER_ALLOWED_REGISTRIES", [])
for _entry in EULER_ALLOWED_REGISTRIES:
    if not re.fullmatch(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?", _entry):
        raise ImproperlyConfigured(f"EULER_ALLOWED_REGISTRIES: {_entry!r} is not a registry host or host:port")

# The least isolation each node trust level runs jobs under: `trust=level` pairs (level runc or sandbox); trust
# levels not named keep the default community=sandbox, platform=runc, untrusted=runc (docs/nodes.md).
try:
    EULER_TRUST_MIN_ISOLATION = _parse_trust_min(env_str("EULER_TRUST_MIN_ISOLATION", "") or "")
except ValueError as _exc:
    raise ImproperlyConfigured(str(_exc)) from None

BEAT_SCHEDULE: dict = {
    "jobs-schedule-pass": {"task": "jobs.tasks.schedule", "schedule": timedelta(seconds=EULER_SCHEDULER_INTERVAL)},
    "jobs-sweep": {"task": "jobs.tasks.sweep", "schedule": timedelta(seconds=5)},
    "jobs-enforce-budgets": {"task": "jobs.tasks.enforce_budgets", "schedule": timedelta(seconds=15)},
    "checkpoints-purge-expired": {"task": "jobs.checkpoints.tasks.purge_expired", "schedule": timedelta(hours=1)},
}

# Job outputs' own settings (jobs/outputs/conf.py), merged here so that config.settings reads one module per app.
globals().update({k: v for k, v in vars(_outputs_conf).items() if k.startswith("EULER_")})
BEAT_SCHEDULE.update(_outputs_conf.BEAT_SCHEDULE)
