"""Settings of the agents app, read from the environment (merged into config.settings)."""

from django.core.exceptions import ImproperlyConfigured

from euler.env import env_float, env_int, env_list

# CIDR ranges that the SSRF guard lets through although they are not global (isolated test networks).
EULER_AGENT_ALLOWED_NETWORKS = env_list("EULER_AGENT_ALLOWED_NETWORKS", [])
# How often beat looks for instances whose health check is due (each agent has its own interval).
EULER_AGENT_HEALTH_TICK = env_float("EULER_AGENT_HEALTH_TICK", 2.0, minimum=0.5)
# One deadline for a whole health check (connect, headers and body), in seconds: an agent's own
# `health_timeout_s` applies when shorter. The checks of a round run at once, so a round costs one deadline.
EULER_AGENT_HEALTH_DEADLINE = env_float("EULER_AGENT_HEALTH_DEADLINE", 5.0, minimum=0.1)
# At most this many instances are checked in one round (one connection each); the others stay due.
EULER_AGENT_HEALTH_BATCH = env_int("EULER_AGENT_HEALTH_BATCH", 500, minimum=1, maximum=10_000)


def _validate_networks() -> None:
    from agents.ssrf import parse_networks

    try:
        parse_networks(EULER_AGENT_ALLOWED_NETWORKS)
    except ValueError as exc:
        raise ImproperlyConfigured(f"EULER_AGENT_ALLOWED_NETWORKS: {exc}") from None


_validate_networks()

BEAT_SCHEDULE: dict = {
    "agents-health-checks": {"task": "agents.tasks.run_health_checks", "schedule": EULER_AGENT_HEALTH_TICK},
}
