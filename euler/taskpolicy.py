"""Where each Celery task runs and how long it may take: one table, turned into Celery's own settings.

The control loop (scheduling passes, offline detection, the backstop sweeps) has its own queue and its own worker
process, so that nothing a tenant or a lender supplies (an upstream's health answer, a flood of invocations to
flush) can hold a process it needs. Every task has a soft limit (SoftTimeLimitExceeded is raised in it: it
rolls back and releases its locks) and a hard one (the pool process is killed and replaced). Periodic tasks are
single-flight (euler/celerytask.py): a run that finds the previous one still going is skipped and counted.

Plain data, no Django imports: settings.py builds CELERY_TASK_ROUTES, CELERY_TASK_ANNOTATIONS and the beat
entries' expiry from it, and tests walk the registered tasks against it.
"""

from __future__ import annotations

from dataclasses import dataclass

CONTROL = "control"  # scheduling and liveness: nothing tenant-driven
HEALTH = "health"  # agent health checks: each upstream is a tenant's server
MAINTENANCE = "maintenance"  # flushes, metering, retention, log compaction
WEBHOOKS = "webhooks"  # webhook deliveries: each destination is a tenant's server, perhaps a dead one
# Turning job events into deliveries and handing them to the senders, projects in turns: database work only,
# never a tenant's server, on a worker of its own, so that a backlog of slow deliveries cannot hold it.
DISPATCH = "dispatch"
QUEUES = (CONTROL, HEALTH, MAINTENANCE, WEBHOOKS, DISPATCH)
DEFAULT_QUEUE = MAINTENANCE  # a task missing from the table never lands on the control queue


@dataclass(frozen=True)
class TaskPolicy:
    queue: str
    soft: float  # seconds: SoftTimeLimitExceeded inside the task
    hard: float  # seconds: the pool process is killed
    single_flight: bool = True  # periodic: skip a run while the previous one holds the lock


def policies(*, health_deadline: float) -> dict[str, TaskPolicy]:
    """Every task of the project by its registered name. A health round costs one deadline (checks run
    concurrently) plus the database writes of its results."""
    health_soft = health_deadline + 20.0
    return {
        # jobs.tasks.schedule coalesces on its own Redis lock and dirty flag (jobs/scheduling/cycle.py): a second
        # run returns at once and the holder goes again. Its soft limit stays well under that lock's 120 s expiry.
        "jobs.tasks.schedule": TaskPolicy(CONTROL, 50.0, 60.0, single_flight=False),
        "jobs.tasks.sweep": TaskPolicy(CONTROL, 50.0, 60.0),
        "jobs.tasks.node_lost": TaskPolicy(CONTROL, 50.0, 60.0, single_flight=False),  # per node, not periodic
        "nodes.tasks.mark_offline": TaskPolicy(CONTROL, 25.0, 30.0),
        "nodes.tasks.flush_seen": TaskPolicy(CONTROL, 25.0, 30.0),
        # A schedule tick submits jobs: database work only, projects in turns, bounded per run in time
        # (EULER_SCHEDULE_PASS_SECONDS); exactly once per tick comes from the (schedule, tick) unique constraint,
        # not from this task's single flight.
        "workflows.tasks.schedule_tick": TaskPolicy(CONTROL, 25.0, 30.0),
        # The services controller: database work (replicas are jobs submitted and cancelled through jobs.services)
        # and one Redis read per service; never a tenant's server (readiness probes are the health checker's).
        "services.tasks.reconcile_services": TaskPolicy(CONTROL, 25.0, 30.0),
        # Stops attempts before their node's lender's window closes (lending/windows.py): database work only.
        "lending.tasks.stop_at_window_end": TaskPolicy(CONTROL, 25.0, 30.0),
        "agents.tasks.run_health_checks": TaskPolicy(HEALTH, health_soft, health_soft + 10.0),
        "workflows.tasks.webhook_dispatch": TaskPolicy(DISPATCH, 25.0, 30.0),
        # Claims take row locks with SKIP LOCKED: two pumps at once claim different rows, so no single flight.
        "workflows.tasks.webhook_pump": TaskPolicy(DISPATCH, 25.0, 30.0, single_flight=False),
        # One batch of one project, its tries concurrent: a deadline of at most 60 s (EULER_WEBHOOK_TIMEOUT) plus
        # the writes of at most EULER_WEBHOOK_SENDING_PER_PROJECT tries.
        "workflows.tasks.webhook_deliver": TaskPolicy(WEBHOOKS, 75.0, 90.0, single_flight=False),
        "jobs.tasks.enforce_budgets": TaskPolicy(MAINTENANCE, 50.0, 60.0),
        "quotas.flush_invocations": TaskPolicy(MAINTENANCE, 25.0, 30.0),
        "jobs.tasks.compact_logs": TaskPolicy(MAINTENANCE, 50.0, 60.0),
        "lending.tasks.refresh_reliability": TaskPolicy(MAINTENANCE, 250.0, 300.0),  # every approved node
        "gateway.tasks.prune_invocations": TaskPolicy(MAINTENANCE, 900.0, 960.0),
        "workflows.tasks.prune_deliveries": TaskPolicy(MAINTENANCE, 900.0, 960.0),
        "euler.tasks.purge_expired": TaskPolicy(MAINTENANCE, 1800.0, 1860.0),
        "jobs.outputs.tasks.purge_expired": TaskPolicy(MAINTENANCE, 1800.0, 1860.0),
        "jobs.checkpoints.tasks.purge_expired": TaskPolicy(MAINTENANCE, 1800.0, 1860.0),
    }


def routes(table: dict[str, TaskPolicy]) -> dict[str, dict]:
    """CELERY_TASK_ROUTES."""
    return {name: {"queue": p.queue} for name, p in table.items()}


def annotations(table: dict[str, TaskPolicy]) -> dict[str, dict]:
    """CELERY_TASK_ANNOTATIONS: the time limits, set on each task class when the app finalizes."""
    return {name: {"soft_time_limit": p.soft, "time_limit": p.hard} for name, p in table.items()}


def single_flight(table: dict[str, TaskPolicy]) -> frozenset[str]:
    return frozenset(name for name, p in table.items() if p.single_flight)


def schedule_seconds(schedule) -> float:
    """A beat entry's interval in seconds (a number or a timedelta)."""
    return float(schedule.total_seconds() if hasattr(schedule, "total_seconds") else schedule)


def with_expiry(beat: dict[str, dict]) -> dict[str, dict]:
    """Beat entries whose messages expire after one interval: a worker that was busy or down finds the
    latest tick, not a backlog of them (at least 1 s, so a message in transit is not dropped)."""
    out = {}
    for key, entry in beat.items():
        options = {"expires": max(1.0, schedule_seconds(entry["schedule"])), **entry.get("options", {})}
        out[key] = {**entry, "options": options}
    return out
