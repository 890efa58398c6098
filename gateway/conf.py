"""Settings of the gateway app, read from the environment (merged into config.settings)."""

from euler.env import env_float, env_int

# Connections the shared upstream client may hold open at once (streams included).
EULER_GATEWAY_MAX_CONNECTIONS = env_int("EULER_GATEWAY_MAX_CONNECTIONS", 2048, minimum=1)
EULER_GATEWAY_MAX_KEEPALIVE = env_int("EULER_GATEWAY_MAX_KEEPALIVE", 512, minimum=0)
# Idle upstream connections are dropped after this many seconds: below the 5 s keep-alive of
# uvicorn/gunicorn, so the gateway rarely reuses a connection that the agent is closing.
EULER_GATEWAY_KEEPALIVE_EXPIRY = env_float("EULER_GATEWAY_KEEPALIVE_EXPIRY", 4.0, minimum=0)
# Seconds a routing table (agent config + instance health) is reused before reloading.
EULER_GATEWAY_ROUTE_TTL = env_float("EULER_GATEWAY_ROUTE_TTL", 2.0, minimum=0)
# A call to a service with no ready replica (scaled to zero, or starting) waits this many seconds for one before
# it is answered 503 no_ready_replica with Retry-After.
EULER_GATEWAY_COLD_START_WAIT = env_float("EULER_GATEWAY_COLD_START_WAIT", 120.0, minimum=0)
# Seconds an API key lookup is reused in process memory (a revoked key stops within this).
EULER_GATEWAY_KEY_CACHE_TTL = env_float("EULER_GATEWAY_KEY_CACHE_TTL", 2.0, minimum=0)
# Passive ejection: this many connect errors or 5xx in a row eject an instance for EJECT_SECONDS.
EULER_GATEWAY_EJECT_AFTER = env_int("EULER_GATEWAY_EJECT_AFTER", 3, minimum=1)
EULER_GATEWAY_EJECT_SECONDS = env_float("EULER_GATEWAY_EJECT_SECONDS", 30.0, minimum=0)
# Invocation records are bulk-inserted every FLUSH_INTERVAL seconds or when FLUSH_SIZE are buffered.
EULER_GATEWAY_FLUSH_INTERVAL = env_float("EULER_GATEWAY_FLUSH_INTERVAL", 1.0, minimum=0.05)
EULER_GATEWAY_FLUSH_SIZE = env_int("EULER_GATEWAY_FLUSH_SIZE", 500, minimum=1)
EULER_GATEWAY_BUFFER_MAX = env_int("EULER_GATEWAY_BUFFER_MAX", 100_000, minimum=100)

# Fair use. An invoke body larger than this is refused (413 body_too_large) before any upstream sees it.
EULER_GATEWAY_MAX_BODY_BYTES = env_int("EULER_GATEWAY_MAX_BODY_BYTES", 10 << 20, minimum=0)
# Upstream calls one project may have in flight at once, across all web processes (429
# too_many_concurrent_calls); the operator sets another figure per project on its quota.
EULER_GATEWAY_MAX_CONCURRENT = env_int("EULER_GATEWAY_MAX_CONCURRENT", 64, minimum=1)
# A concurrency lease outlives a dead web process by at most this many seconds (renewed every third).
EULER_GATEWAY_LEASE_SECONDS = env_float("EULER_GATEWAY_LEASE_SECONDS", 30.0, minimum=1.0)

# Invocation records older than this are deleted by an hourly beat task (stats reach back 7 days).
EULER_GATEWAY_RETENTION_DAYS = env_int("EULER_GATEWAY_RETENTION_DAYS", 30, minimum=7)

BEAT_SCHEDULE: dict = {
    "gateway-prune-invocations": {"task": "gateway.tasks.prune_invocations", "schedule": 3600.0},
}
