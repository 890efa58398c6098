"""Settings of the workflows app (schedules, webhooks), read from the environment (merged into euler.settings)."""

from django.core.exceptions import ImproperlyConfigured

from euler.env import env_float, env_int, env_list

# How often beat runs the schedule tick task (seconds): a cron tick's job is submitted at most this late.
EULER_SCHEDULE_TICK = env_float("EULER_SCHEDULE_TICK", 5.0, minimum=0.5)
# Due schedules handled per tick task run (the others stay due for the next run).
EULER_SCHEDULE_BATCH = env_int("EULER_SCHEDULE_BATCH", 200, minimum=1, maximum=10_000)
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
# How often beat turns new job events into deliveries (seconds).
EULER_WEBHOOK_DISPATCH_TICK = env_float("EULER_WEBHOOK_DISPATCH_TICK", 2.0, minimum=0.2)


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
