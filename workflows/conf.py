"""Settings of the workflows app (schedules, webhooks), read from the environment (merged into euler.settings)."""

from django.core.exceptions import ImproperlyConfigured

from euler.env import env_bool, env_float, env_int, env_list

# How often beat runs the schedule tick task (seconds): a cron tick's job is submitted about this late at most,
# when the pass before it was not still running.
EULER_SCHEDULE_TICK = env_float("EULER_SCHEDULE_TICK", 1.0, minimum=0.5)
# How long one tick pass takes new due schedules (seconds; projects in turns, workflows/fairness.py): the
# others stay due for the next pass, which also sees the ones that fell due meanwhile.
EULER_SCHEDULE_PASS_SECONDS = env_float("EULER_SCHEDULE_PASS_SECONDS", 2.0, minimum=0.1)
# The free quota's schedule limits (quotas.Quota; an operator changes a project's in the admin or with setquota):
# schedules per project, the shortest period between two ticks of one schedule (seconds), and the runs per minute
# that a project's enabled schedules may add up to at their busiest.
EULER_FREE_QUOTA_SCHEDULES = env_int("EULER_FREE_QUOTA_SCHEDULES", 100, minimum=0)
EULER_FREE_QUOTA_SCHEDULE_MIN_PERIOD = env_int("EULER_FREE_QUOTA_SCHEDULE_MIN_PERIOD", 60, minimum=60)
EULER_FREE_QUOTA_SCHEDULE_RUNS_PER_MINUTE = env_int("EULER_FREE_QUOTA_SCHEDULE_RUNS_PER_MINUTE", 100, minimum=0)
# Retention of schedule runs (days; 0 keeps them): a per-minute schedule writes 1,440 a day.
EULER_SCHEDULE_RUN_RETENTION_DAYS = env_int("EULER_SCHEDULE_RUN_RETENTION_DAYS", 7, minimum=0)
# CIDR ranges that webhook destinations may use although they are not global (tests on loopback, isolated
# networks). Empty: only global addresses, checked at creation and at every connect, like the gateway's.
EULER_WEBHOOK_ALLOWED_NETWORKS = env_list("EULER_WEBHOOK_ALLOWED_NETWORKS", [])
# One deadline for a whole delivery try (connect, request, the answer's first bytes), in seconds.
EULER_WEBHOOK_TIMEOUT = env_float("EULER_WEBHOOK_TIMEOUT", 5.0, minimum=0.1)
# Tries per delivery before it is marked failed (redeliver starts a new one).
EULER_WEBHOOK_MAX_TRIES = env_int("EULER_WEBHOOK_MAX_TRIES", 6, minimum=1, maximum=20)
# Backoff between tries: this many seconds, tripled per try (with jitter), at most an hour.
EULER_WEBHOOK_RETRY_BACKOFF = env_float("EULER_WEBHOOK_RETRY_BACKOFF", 10.0, minimum=0)
# Deliveries (and their tries) older than this many days leave the log; 0 keeps them.
EULER_WEBHOOK_LOG_DAYS = env_int("EULER_WEBHOOK_LOG_DAYS", 30, minimum=0)
# Open (pending or sending) deliveries a project may have: past it, its new job events wait, in order, until its
# receivers catch up; other projects' are not held (workflows/dispatch.py).
EULER_WEBHOOK_PENDING_PER_PROJECT = env_int("EULER_WEBHOOK_PENDING_PER_PROJECT", 1000, minimum=1)
# Deliveries of one project sent at once (one batch, one task on the `webhooks` queue, concurrent requests).
EULER_WEBHOOK_SENDING_PER_PROJECT = env_int("EULER_WEBHOOK_SENDING_PER_PROJECT", 20, minimum=1, maximum=200)
# How often beat turns new job events into deliveries and hands the due ones to the senders (seconds).
EULER_WEBHOOK_DISPATCH_TICK = env_float("EULER_WEBHOOK_DISPATCH_TICK", 2.0, minimum=0.2)
# Whether new job events ask for a dispatch pass at once (workflows/nudge.py) rather than waiting for beat's tick.
EULER_WEBHOOK_DISPATCH_NUDGE = env_bool("EULER_WEBHOOK_DISPATCH_NUDGE", True)


def _validate_networks() -> None:
    from nodeagent.netaddr import parse_networks

    try:
        parse_networks(EULER_WEBHOOK_ALLOWED_NETWORKS)
    except ValueError as exc:
        raise ImproperlyConfigured(f"EULER_WEBHOOK_ALLOWED_NETWORKS: {exc}") from None


_validate_networks()

BEAT_SCHEDULE: dict = {
    "workflows-schedule-tick": {"task": "workflows.tasks.schedule_tick", "schedule": EULER_SCHEDULE_TICK},
    "workflows-webhook-dispatch": {"task": "workflows.tasks.webhook_dispatch", "schedule": EULER_WEBHOOK_DISPATCH_TICK},
    "workflows-prune-deliveries": {"task": "workflows.tasks.prune_deliveries", "schedule": 3600.0},
}
