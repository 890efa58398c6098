"""Settings of the services app (issue 38), read from the environment (merged into config.settings)."""

from euler.env import env_float, env_int

# How often beat runs the services controller (replace failed replicas, roll out, scale, drain).
EULER_SERVICE_TICK = env_float("EULER_SERVICE_TICK", 2.0, minimum=0.2)
# A replica leaves the gateway's rotation this long before its container is stopped: every web process's route
# cache (EULER_GATEWAY_ROUTE_TTL, used stale up to five times that) forgets it, and calls in flight finish.
EULER_SERVICE_DRAIN_SECONDS = env_float("EULER_SERVICE_DRAIN_SECONDS", 20.0, minimum=0)
# A replica not ready (its readiness probe passing) this long after it was submitted is replaced; during a rollout,
# the new revision is rolled back instead.
EULER_SERVICE_READY_TIMEOUT = env_float("EULER_SERVICE_READY_TIMEOUT", 600.0, minimum=1)
# The most replicas a service may ask for.
EULER_SERVICE_MAX_REPLICAS = env_int("EULER_SERVICE_MAX_REPLICAS", 20, minimum=1, maximum=1000)
# Autoscaling windows: scale up when the mean in-flight calls per ready replica over the short window exceed the
# target; scale down when they stayed below it over the long one.
EULER_SERVICE_SCALE_UP_WINDOW = env_float("EULER_SERVICE_SCALE_UP_WINDOW", 10.0, minimum=1)
EULER_SERVICE_SCALE_DOWN_WINDOW = env_float("EULER_SERVICE_SCALE_DOWN_WINDOW", 120.0, minimum=1)

BEAT_SCHEDULE: dict = {
    "services-reconcile": {"task": "services.tasks.reconcile_services", "schedule": EULER_SERVICE_TICK},
}
