"""Settings of the nodes app, read from the environment (merged into config.settings)."""

from euler.env import env_bool, env_float, env_int, env_list, env_str  # noqa: F401

# A node that has not sent a heartbeat for this long is marked offline (its attempts become lost).
EULER_NODE_OFFLINE_AFTER = env_float("EULER_NODE_OFFLINE_AFTER", 30.0, minimum=1.0)
# When every online node (two or more) goes silent at once, the fault is more likely on the control
# plane's side: wait this many more seconds before marking them all offline (their attempts lost).
EULER_NODE_SILENCE_HOLD = env_float("EULER_NODE_SILENCE_HOLD", 90.0, minimum=0.0)
# An agent that stops and leaves its jobs' containers running for its next start says so (POST leaving): those
# attempts are not lost while the node is offline for up to this many seconds after that (0: no hold).
EULER_NODE_RESTART_HOLD = env_float("EULER_NODE_RESTART_HOLD", 60.0, minimum=0.0)
# How often the beat task looks for silent nodes.
EULER_NODE_OFFLINE_CHECK_EVERY = env_float("EULER_NODE_OFFLINE_CHECK_EVERY", 5.0, minimum=0.5)
# Heartbeat interval told to nodes: at least MIN, scaled so that all nodes together send at most the
# summed budgets of the live web processes, at most MAX_INTERVAL; shortened by up to JITTER.
EULER_NODE_HEARTBEAT_MIN_INTERVAL = env_float("EULER_NODE_HEARTBEAT_MIN_INTERVAL", 5.0, minimum=0.1)
EULER_NODE_HEARTBEAT_MAX_INTERVAL = env_float("EULER_NODE_HEARTBEAT_MAX_INTERVAL", 60.0, minimum=0.1)
EULER_NODE_HEARTBEAT_JITTER = env_float("EULER_NODE_HEARTBEAT_JITTER", 0.1, minimum=0.0)
# Heartbeats/s this web process offers (registered in Redis while it lives; BENCHMARKS.md has the measure).
EULER_NODE_HEARTBEAT_BUDGET = env_float("EULER_NODE_HEARTBEAT_BUDGET", 1000.0, minimum=1.0)
# A web process's registration lives this long unless renewed (it renews every third of it while serving).
EULER_NODE_WEB_TTL = env_float("EULER_NODE_WEB_TTL", 15.0, minimum=1.0)
# A node is never marked offline before it has missed this many of its own heartbeat intervals.
EULER_NODE_OFFLINE_MISSED = env_int("EULER_NODE_OFFLINE_MISSED", 3, minimum=2)
# Last-seen times live in Redis; they are written to the node rows (last_heartbeat_at) in one statement
# this often. Heartbeat hooks (database reads) run at least this often per node, or when its work changed.
EULER_NODE_SEEN_FLUSH_EVERY = env_float("EULER_NODE_SEEN_FLUSH_EVERY", 5.0, minimum=0.5)
EULER_NODE_HOOKS_EVERY = env_float("EULER_NODE_HOOKS_EVERY", 120.0, minimum=0.0)
# The longest long-poll wait nodes are told (seconds). The wait follows the heartbeat interval (never below the
# protocol's 25 s), so that idle polls cost no more requests than heartbeats; keep it under the read timeout of
# any HTTP proxy in front of the web processes (nginx: 60 s).
EULER_NODE_POLL_WAIT_MAX = env_float("EULER_NODE_POLL_WAIT_MAX", 55.0, minimum=1.0)
# Client networks allowed to call the node endpoints over plain HTTP (CIDRs); everyone else needs HTTPS.
EULER_NODE_HTTP_ALLOWED_NETWORKS = env_list("EULER_NODE_HTTP_ALLOWED_NETWORKS", ["127.0.0.0/8", "::1/128"])
# Threads (per web process) that do the database work of heartbeats and polls; each keeps a connection.
EULER_NODE_DB_THREADS = env_int("EULER_NODE_DB_THREADS", 8, minimum=1, maximum=256)
# Threads (per web process) for the heartbeats memory cannot answer (a Redis round trip; the database when a
# node changed or is not cached): apart from the database threads, so polls never hold them up. Each keeps a
# database connection.
EULER_NODE_BEAT_THREADS = env_int("EULER_NODE_BEAT_THREADS", 4, minimum=1, maximum=64)
# The web process's GIL switch interval in seconds (sys.setswitchinterval); 0 keeps Python's 0.005. Shorter
# lets the event loop (heartbeats, accepting connections) take the GIL back sooner from busy threads.
EULER_WEB_SWITCH_INTERVAL = env_float("EULER_WEB_SWITCH_INTERVAL", 0.0, minimum=0.0)
# The web process's third garbage-collector threshold (gc.set_threshold): generation-1 collections between two
# looks at a full collection (Python's default 10; 0 keeps it). A full collection walks every object, and with
# 10,000 held long-polls that paused the event loop for 0.2–1 s every 5–25 s (euler_gc_pause_seconds).
EULER_WEB_GC_FULL_AFTER = env_int("EULER_WEB_GC_FULL_AFTER", 10_000, minimum=0)
# Threads (per web process) that run requests to sync views (the REST API, the console, the admin), each request
# whole on one of them (euler/synchandler.py): at most this many such requests are served at once.
EULER_WEB_SYNC_THREADS = env_int("EULER_WEB_SYNC_THREADS", 16, minimum=1, maximum=256)
# Enrollment tokens: default and maximum lifetime in seconds.
EULER_ENROLLMENT_TOKEN_TTL = env_int("EULER_ENROLLMENT_TOKEN_TTL", 3600, minimum=60, maximum=7 * 86400)
EULER_ENROLLMENT_TOKEN_MAX_TTL = 7 * 86400

BEAT_SCHEDULE: dict = {
    "nodes-mark-offline": {"task": "nodes.tasks.mark_offline", "schedule": EULER_NODE_OFFLINE_CHECK_EVERY},
    "nodes-flush-seen": {"task": "nodes.tasks.flush_seen", "schedule": EULER_NODE_SEEN_FLUSH_EVERY},
}
