"""Every setting Euler reads from the environment, with its default and meaning: the one source that
`docs/configuration.md` is generated from (`python -m euler.catalog > docs/configuration.md`); a test checks
that the file is current and that every variable the code reads is here."""

from __future__ import annotations

from typing import NamedTuple


class Setting(NamedTuple):
    names: str  # as shown: `A`, or `A` / `B` for a pair set together
    default: str
    meaning: str


# (section title, its settings), in the order the page shows them.
SECTIONS: tuple[tuple[str, tuple[Setting, ...]], ...] = (
    (
        "Platform (web, worker, beat, `make up`)",
        (
            Setting("`EULER_DATA_DIR`", "`./var`", "where SQLite, the embedded Redis socket and dev secrets live"),
            Setting(
                "`DATABASE_URL`",
                "SQLite at `$EULER_DATA_DIR/euler.sqlite3`",
                "e.g. `postgres://user:pass@host:5432/euler`",
            ),
            Setting(
                "`REDIS_URL`",
                "embedded: `unix://$EULER_DATA_DIR/redis.sock`",
                "`redis://host:6379/0`; broker, channel layer, counters",
            ),
            Setting("`DJANGO_DEBUG`", "`true`", "set `false` in production (then the two secrets below are required)"),
            Setting("`DJANGO_SECRET_KEY`", "generated once into the data dir (debug only)", "Django's signing key"),
            Setting(
                "`EULER_ENCRYPTION_KEYS`",
                "generated once into the data dir (debug only)",
                "`id:base64key[,id:base64key…]`, 16/24/32-byte AES keys; the first encrypts, all decrypt; then run `manage.py rotate_encryption_keys`",
            ),
            Setting(
                "`DJANGO_ALLOWED_HOSTS`", "`localhost,127.0.0.1,[::1]`", "comma-separated host names the web answers"
            ),
            Setting("`DJANGO_CSRF_TRUSTED_ORIGINS`", "empty", "e.g. `https://euler.example.com` behind a proxy"),
            Setting("`DJANGO_SECURE_COOKIES`", "`true` unless debug", "Secure flag on the session and CSRF cookies"),
            Setting(
                "`EULER_BEHIND_TLS_PROXY`",
                "`false`",
                "trust `X-Forwarded-Proto: https` from the proxy (`SECURE_PROXY_SSL_HEADER`)",
            ),
            Setting(
                "`EULER_PUBLIC_URL`",
                "`http://127.0.0.1:8000`",
                "the URL nodes and users reach the platform at (shown in enrollment commands)",
            ),
            Setting("`EULER_LOG_LEVEL`", "`INFO`", "root log level"),
            Setting("`EULER_CELERY_EAGER`", "`false`", "run Celery tasks inline (tests only)"),
            Setting(
                "`EULER_WORKER_MAX_MEMORY_MB`",
                "`512`",
                "a worker's pool process whose resident memory passes this many MiB is replaced after its current task (Celery's `worker_max_memory_per_child`)",
            ),
            Setting("`OIDC_RP_CLIENT_ID`", "unset (OIDC off)", 'client id at the OIDC provider ("E时代通行证")'),
            Setting("`OIDC_RP_CLIENT_SECRET`", "unset", "client secret"),
            Setting("`OIDC_OP_AUTHORIZATION_ENDPOINT`", "unset", "provider authorization endpoint"),
            Setting("`OIDC_OP_TOKEN_ENDPOINT`", "unset", "provider token endpoint"),
            Setting("`OIDC_OP_USER_ENDPOINT`", "unset", "provider userinfo endpoint"),
            Setting("`OIDC_OP_JWKS_ENDPOINT`", "unset", "provider JWKS (required for RS*/ES* signatures)"),
            Setting("`OIDC_RP_SIGN_ALGO`", "`RS256`", "ID-token signature algorithm"),
            Setting("`OIDC_RP_SCOPES`", "`openid email profile`", "scopes requested"),
            Setting("`OIDC_PROVIDER_NAME`", "`E时代通行证`", "label of the sign-in button"),
            Setting("`EULER_FREE_QUOTA_CPU_CORE_SECONDS`", "`360000`", "new project's CPU core-seconds per month"),
            Setting("`EULER_FREE_QUOTA_GPU_SECONDS`", "`36000`", "new project's GPU-seconds per month"),
            Setting("`EULER_FREE_QUOTA_INVOCATIONS`", "`100000`", "new project's agent invocations per month"),
            Setting(
                "`EULER_FREE_QUOTA_CONCURRENT_JOBS`",
                "`1000`",
                'new project\'s concurrent jobs: a hard ceiling, generous on purpose (see "Sharing the pool")',
            ),
            Setting("`EULER_FREE_QUOTA_API_KEYS`", "`20`", "new project's active API keys"),
            Setting(
                "`EULER_QUOTA_GRACE`",
                "`0.05`",
                "overshoot allowed past a CPU/GPU budget before running jobs are stopped",
            ),
            Setting("`PORT`, `HOST`", "`8000`, `127.0.0.1`", "where `make up` serves"),
            Setting("`EULER_WEB_SERVER`", "`uvicorn`", "`uvicorn` or `daphne` for `make up`"),
            Setting(
                "`EULER_UP_STOP_TIMEOUT`",
                "`10`",
                "seconds `make up` gives its children to stop before it kills them (SIGKILL, and says so)",
            ),
            Setting(
                "`DJANGO_SUPERUSER_USERNAME` / `DJANGO_SUPERUSER_PASSWORD` / `DJANGO_SUPERUSER_EMAIL`",
                "`admin` / generated / `admin@example.com`",
                "the admin `make up` creates on first run",
            ),
            Setting("`EULER_METRICS_TOKEN`", "unset (open)", "Bearer token required by `GET /metrics`"),
            Setting(
                "`EULER_LOG_FORMAT`",
                "`plain` in debug, else `json`",
                "log line format; JSON lines carry the request id",
            ),
            Setting(
                "`EULER_AUTH_FAILURES_PER_MINUTE`",
                "`30`",
                "failed API-key guesses per presented key prefix, and failed enrollment-token / node-credential / invitation guesses per client address, per minute before 429 (`0` disables); a valid key is never refused",
            ),
            Setting(
                "`EULER_AUTH_FAILURES_PER_ADDRESS_PER_MINUTE`",
                "`600`",
                "failed API-key guesses per client address per minute before that address's failures answer 429",
            ),
            Setting(
                "`EULER_LOGIN_FAILURES_PER_15_MINUTES`",
                "`10`",
                "failed password sign-ins per address and username in 15 minutes (10× that per address) before sign-in answers 429, audited as `login.throttled`",
            ),
            Setting(
                "`EULER_TRUSTED_PROXIES`",
                "empty",
                "comma-separated CIDRs of reverse proxies whose `X-Forwarded-For` names the client (rightmost untrusted hop); from anyone else the header is ignored",
            ),
            Setting(
                "`EULER_DB_POOL`",
                "`false`",
                "use a psycopg connection pool for PostgreSQL (else a connection per request)",
            ),
            Setting(
                "`EULER_DB_POOL_MIN` / `EULER_DB_POOL_MAX`",
                "`1` / `20`",
                "pool size per process when `EULER_DB_POOL` is on",
            ),
        ),
    ),
    (
        "Nodes: liveness and enrollment (server side)",
        (
            Setting(
                "`EULER_NODE_OFFLINE_AFTER`",
                "`30`",
                "seconds without a heartbeat before a node is offline (its attempts become lost)",
            ),
            Setting("`EULER_NODE_OFFLINE_CHECK_EVERY`", "`5`", "seconds between offline checks (beat)"),
            Setting(
                "`EULER_NODE_SILENCE_HOLD`",
                "`90`",
                "extra wait when every online node (two or more) goes silent at once — a control-plane outage, not dead machines; also the most extra time nodes get while the web tier runs late (its event loops over 1 s behind)",
            ),
            Setting("`EULER_NODE_HEARTBEAT_MIN_INTERVAL`", "`5`", "shortest heartbeat interval the server hands out"),
            Setting(
                "`EULER_NODE_HEARTBEAT_BUDGET`",
                "`1000`",
                "heartbeats/s this web process offers; each live web process registers its budget in Redis and the interval grows with nodes ÷ the summed budgets (adding web processes shortens it)",
            ),
            Setting("`EULER_NODE_HEARTBEAT_MAX_INTERVAL`", "`60`", "longest heartbeat interval the server hands out"),
            Setting(
                "`EULER_NODE_OFFLINE_MISSED`",
                "`3`",
                "a node is never offline before it has missed this many of its own intervals (the window is the longer of this and `EULER_NODE_OFFLINE_AFTER`)",
            ),
            Setting(
                "`EULER_NODE_WEB_TTL`",
                "`15`",
                "seconds a web process's budget registration lives unless renewed (renewed every third of it while it serves heartbeats)",
            ),
            Setting(
                "`EULER_NODE_SEEN_FLUSH_EVERY`",
                "`5`",
                "seconds between batch writes of last-seen times from Redis to `last_heartbeat_at` (beat → worker, one statement per 5,000 nodes)",
            ),
            Setting(
                "`EULER_NODE_HOOKS_EVERY`",
                "`120`",
                "heartbeat hooks (database reads of the jobs app) run when the node's listed attempts change, when a hook asked to look again, and at least this often",
            ),
            Setting(
                "`EULER_NODE_POLL_WAIT_MAX`",
                "`55`",
                "the longest long-poll wait nodes are told (seconds); the wait follows the heartbeat interval, at least 25 s, so idle polls cost no more requests than heartbeats; keep it under the read timeout of a proxy in front of the web (nginx: 60 s)",
            ),
            Setting(
                "`EULER_NODE_BEAT_THREADS`",
                "`4`",
                "threads per web process that serve the heartbeats its memory cannot answer alone (a Redis round trip, and the database when the node changed or is not cached), apart from the database threads so that polls never hold them up; each keeps a database connection",
            ),
            Setting("`EULER_NODE_HEARTBEAT_JITTER`", "`0.1`", "up to this fraction shorter, at random"),
            Setting(
                "`EULER_NODE_HTTP_ALLOWED_NETWORKS`",
                "`127.0.0.0/8,::1/128`",
                "client networks allowed to use the node endpoints over plain HTTP",
            ),
            Setting("`EULER_NODE_DB_THREADS`", "`8`", "database threads per web process for heartbeats and polls"),
            Setting(
                "`EULER_WEB_SWITCH_INTERVAL`",
                "`0` (Python's 0.005)",
                'the web process\'s GIL switch interval in seconds (`sys.setswitchinterval`): shorter lets the event loop take the GIL back sooner from busy database threads (BENCHMARKS.md, "Ten thousand nodes", third pass)',
            ),
            Setting(
                "`EULER_WEB_GC_FULL_AFTER`",
                "`10000`",
                "the web process's third garbage-collector threshold (generation-1 collections between looks at a full collection; Python's default is 10, `0` keeps it). A full collection walks every object: with 10,000 held long-polls it paused the event loop 0.2–1 s every 5–25 s. The web process also freezes what start-up built out of later collections. `euler_gc_pause_seconds` and a warning past 100 ms show the pauses",
            ),
            Setting(
                "`EULER_ENROLLMENT_TOKEN_TTL`",
                "`3600`",
                "default enrollment-token lifetime in seconds (60 s to 7 days)",
            ),
            Setting("`EULER_LOCAL_NODE_NAME`", "`local-<hostname>`", "name of the node `make up` starts"),
            Setting(
                "`EULER_NODE_LABELS` (with `make up`)", "empty", "labels (`k=v,k=v`) of the local node `make up` starts"
            ),
        ),
    ),
    (
        "Jobs and the scheduler",
        (
            Setting(
                "`EULER_SCHEDULER_INTERVAL`",
                "`2.0`",
                "seconds between beat-driven scheduling passes (passes also run on submit, attempt end, node change)",
            ),
            Setting("`EULER_SCHEDULER_BATCH`", "`1000`", "queued jobs placed per transaction"),
            Setting(
                "`EULER_SCHEDULER_HANDOVER_WINDOW`",
                "`100`",
                'attempts per live web process handed to nodes and not yet started; a pass holds the rest back (pending reason "waiting for nodes to start…") so a large queue cannot bury the web tier and the nodes\' heartbeats; `0`: no limit',
            ),
            Setting(
                "`EULER_SCHEDULER_RESERVE_AFTER`",
                "`300`",
                "seconds a queued job waits before it reserves the node it fits best (so a stream of small jobs cannot starve a large one)",
            ),
            Setting(
                "`EULER_FAIRSHARE_HALF_LIFE`",
                "`0`",
                "seconds; above 0, half of a project's fair share comes from its decayed recent usage in the ledger (0: running holdings only)",
            ),
            Setting(
                "`EULER_JOB_RETRY_BACKOFF` / `EULER_JOB_RETRY_BACKOFF_MAX`",
                "`2.0` / `300`",
                "retry backoff base (doubles per retry) and cap, seconds",
            ),
            Setting(
                "`EULER_JOB_TIMEOUT_GRACE`",
                "`60`",
                "server backstop: an attempt this long past its timeout fails `timeout`",
            ),
            Setting("`EULER_JOB_START_GRACE`", "`900`", "extra time an assigned attempt gets to start (image pull)"),
            Setting(
                "`EULER_JOB_REDELIVER_AFTER`",
                "`30`",
                "an assignment or stop command not acted on is sent again after this many seconds",
            ),
            Setting(
                "`EULER_JOB_MISSING_GRACE`",
                "`20`",
                "a running attempt that its node stops listing for this long is lost",
            ),
            Setting(
                "`EULER_JOB_DEFAULT_DISK_BYTES`",
                "`10737418240` (10 GiB)",
                "a job's `disk_bytes` when the submission does not say (at least 4 MiB)",
            ),
            Setting("`EULER_MAX_LOG_BYTES`", "`10485760`", "log bytes kept per attempt, then one truncation marker"),
            Setting(
                "`EULER_ALLOWED_REGISTRIES`",
                "empty",
                "image registries jobs may name although the image policy refuses them (an IP address, `localhost`, a name resolving to a private address): `host` (any port) or `host:port`, comma-separated",
            ),
        ),
    ),
    (
        "Retention and log storage",
        (
            Setting(
                "`EULER_JOB_RETENTION_DAYS`",
                "`30`",
                "ended jobs (with their attempts, events and logs) and node events older than this are deleted hourly by beat; `0` keeps them",
            ),
            Setting(
                "`EULER_AUDIT_RETENTION_DAYS`",
                "`365`",
                "audit events older than this are deleted hourly by beat; `0` keeps them",
            ),
            Setting("`EULER_RETENTION_BATCH`", "`500`", "rows deleted (and attempts compacted) per short transaction"),
            Setting(
                "`EULER_LOG_COMPACT_AFTER`",
                "`300`",
                "seconds after an attempt ends before beat compacts its log chunks into one compressed row (readers see no difference)",
            ),
        ),
    ),
    (
        "Agents and the gateway",
        (
            Setting(
                "`EULER_AGENT_ALLOWED_NETWORKS`",
                "empty",
                "CIDRs the SSRF guard lets through (isolated test networks only)",
            ),
            Setting("`EULER_AGENT_HEALTH_TICK`", "`2.0`", "seconds between beat runs that look for due health checks"),
            Setting(
                "`EULER_AGENT_HEALTH_DEADLINE`",
                "`5.0`",
                "seconds one health check may take in all (connect, headers and body); an agent's shorter `health_timeout_s` wins. At most 64 KiB of the answer is read (more fails the check). The due checks of a round run at once, so N slow upstreams cost one deadline",
            ),
            Setting(
                "`EULER_AGENT_HEALTH_BATCH`",
                "`500`",
                "most instances checked in one round (one connection each); the others stay due for the next round",
            ),
            Setting(
                "`EULER_GATEWAY_MAX_CONNECTIONS` / `EULER_GATEWAY_MAX_KEEPALIVE`",
                "`2048` / `512`",
                "upstream connection pool per web process",
            ),
            Setting(
                "`EULER_GATEWAY_KEEPALIVE_EXPIRY`", "`4.0`", "seconds before an idle upstream connection is dropped"
            ),
            Setting("`EULER_GATEWAY_ROUTE_TTL`", "`2.0`", "seconds a routing table is reused before reloading"),
            Setting(
                "`EULER_GATEWAY_KEY_CACHE_TTL`",
                "`2.0`",
                "seconds an API-key lookup is reused by the gateway (a revoked key stops within twice this)",
            ),
            Setting(
                "`EULER_GATEWAY_EJECT_AFTER` / `EULER_GATEWAY_EJECT_SECONDS`",
                "`3` / `30`",
                "consecutive failures that eject an instance, and for how long",
            ),
            Setting(
                "`EULER_GATEWAY_FLUSH_INTERVAL` / `EULER_GATEWAY_FLUSH_SIZE`",
                "`1.0` / `500`",
                "call records are bulk-inserted this often, or at this many",
            ),
            Setting(
                "`EULER_GATEWAY_BUFFER_MAX`",
                "`100000`",
                "most call records held in memory before the oldest are dropped",
            ),
            Setting("`EULER_GATEWAY_RETENTION_DAYS`", "`30`", "call records older than this are deleted hourly"),
        ),
    ),
    (
        "The compose stack (`docker-compose.yml`, see [deploy.md](deploy.md))",
        (
            Setting(
                "`EULER_DOMAIN`",
                "`localhost`",
                "the name(s) Caddy serves (`euler.example.com`; comma-separated for several)",
            ),
            Setting(
                "`EULER_TLS`",
                "`internal`",
                "`internal`: Caddy's own CA (a lab; nodes get its root with `EULER_CA_FILE`); an e-mail address: ACME certificates for a real domain",
            ),
            Setting(
                "`EULER_HTTP_PORT` / `EULER_HTTPS_PORT`",
                "`80` / `443`",
                "host ports Caddy publishes (plain HTTP only redirects to HTTPS)",
            ),
            Setting("`EULER_IMAGE`", "`euler:latest`", "Euler's image (web, worker, beat, migrate, node)"),
            Setting(
                "`EULER_POSTGRES_IMAGE` / `EULER_REDIS_IMAGE` / `EULER_CADDY_IMAGE`",
                "`postgres:15` / `redis:7` / `caddy:2`",
                "the other images; offline: `euler-base/…` from `scripts/build-base-images.sh`",
            ),
            Setting("`POSTGRES_PASSWORD`", "`euler`", "the stack's database password"),
            Setting("`EULER_WORKER_CONCURRENCY`", "`4`", "Celery pool processes per worker replica"),
            Setting(
                "`EULER_DOMAIN_ALIAS`",
                "`euler.internal`",
                "Caddy's name on the stack's `edge` network, where the `node` service reaches it",
            ),
            Setting(
                "`EULER_NODE_CA_FILE`",
                "Caddy's internal root (`/caddy/caddy/pki/authorities/local/root.crt`)",
                "the `node` service's `EULER_CA_FILE`; empty for an ACME domain",
            ),
            Setting(
                "`FORWARDED_ALLOW_IPS`",
                "`*` in the stack (web is reachable only on its backend network)",
                "uvicorn: addresses whose `X-Forwarded-For/-Proto` it trusts",
            ),
            Setting(
                "`EULER_BASE_SUITE` / `EULER_BASE_MIRROR`",
                "`bookworm` / the host's apt sources",
                "`scripts/build-base-images.sh`: Debian suite and mirror of the offline base images",
            ),
        ),
    ),
    (
        "The node agent (`./euler-node`, on each host)",
        (
            Setting(
                "`EULER_CONTROL_PLANE_URL`",
                "required",
                "the platform's URL (`https://…`; plain `http://` only to loopback)",
            ),
            Setting("`EULER_ENROLLMENT_TOKEN`", "—", "one-time token, needed on the first start only"),
            Setting("`EULER_NODE_NAME`", "host name", "the node's unique name"),
            Setting(
                "`EULER_NODE_REGION` / `EULER_NODE_LABELS`",
                "empty",
                "region, and labels as `k=v,k=v` (matched by jobs' `node_selector`)",
            ),
            Setting(
                "`EULER_NODE_STATE_DIR`",
                "`/var/lib/euler-node` (root) or `~/.euler-node`",
                "where the credential (0600) and log spools live",
            ),
            Setting(
                "`EULER_CA_FILE`",
                "unset (the public CAs)",
                "PEM file of the CA that signed the control plane's certificate (a lab's internal CA, e.g. Caddy's `tls internal`); the only CA trusted then; also `./euler-node --ca-file PATH`",
            ),
            Setting(
                "`EULER_ALLOW_INSECURE_HTTP`",
                "`false`",
                "allow `http://` to a non-loopback control plane (isolated test networks only)",
            ),
            Setting(
                "`EULER_AGENT_STOP_GRACE`", "`10`", "seconds between SIGTERM and SIGKILL when stopping a container"
            ),
            Setting("`EULER_AGENT_LOG_FLUSH_SECONDS`", "`0.2`", "shortest time between two log chunks"),
            Setting(
                "`EULER_AGENT_LOG_SPOOL_BYTES`",
                "`67108864`",
                'on-disk log buffer per attempt while the control plane is unreachable; once full, the job\'s writes wait (see "Hostile jobs" below)',
            ),
            Setting(
                "`EULER_NODE_MAX_CPU_MILLI` / `EULER_NODE_MAX_MEMORY_BYTES` / `EULER_NODE_MAX_DISK_BYTES`",
                "unset (the machine)",
                "the lender's caps: the node offers the smaller of the machine and the cap",
            ),
            Setting(
                "`EULER_NODE_GPUS`",
                "unset (every GPU)",
                "GPUs to offer: device indexes or UUIDs, comma-separated (`0,2`, `GPU-…`); `none` for no GPU",
            ),
            Setting(
                "`EULER_NODE_JOB_EGRESS`",
                "`public`",
                "jobs' network: `public` (the internet, not the host or private networks), `none` (every job gets loopback only), `unrestricted` (no rules; shown on the node)",
            ),
            Setting(
                "`EULER_NODE_JOB_ALLOWED_NETWORKS`",
                "empty",
                "CIDRs jobs may reach besides the internet, comma-separated (`10.8.0.0/16,fd12::/64`)",
            ),
            Setting(
                "`EULER_NODE_JOB_BLOCKED_NETWORKS`",
                "empty",
                "CIDRs jobs may never reach, besides the built-in private, CGNAT, link-local and ULA ranges; they win over `EULER_NODE_JOB_ALLOWED_NETWORKS`",
            ),
            Setting(
                "`EULER_NODE_JOB_MAX_INODES`",
                "`500000`",
                "files, directories and links one job may create on the node (its writable layer and image volumes); past it the job ends `disk_limit`; `0`: no limit",
            ),
            Setting(
                "`EULER_NODE_ALLOWED_IMAGES`",
                "empty (every image)",
                "the images this node runs, comma-separated: a registry (`ghcr.io`, `registry.lan:5000`), an image (`alpine`) or a pattern (`ghcr.io/org/*`); the scheduler places other jobs elsewhere; a registry named here may be on your own network",
            ),
            Setting(
                "`EULER_NODE_LOCAL_IMAGES`",
                "`false`",
                "on a `community` node, let jobs run images already on the engine that Euler did not pull (your own images); platform and untrusted nodes always may",
            ),
            Setting(
                "`EULER_NODE_IMAGE_CACHE_BYTES`",
                "`21474836480` (20 GiB)",
                "the images Euler pulled on this node are pruned, least recently used first, past this size; never an image a job's container uses, never your own images",
            ),
        ),
    ),
    (
        "The `euler` command line (`client/`, see [cli.md](cli.md))",
        (
            Setting(
                "`EULER_URL` / `EULER_API_KEY`",
                "the stored profile",
                "the server and API key; they override what `euler login` stored",
            ),
            Setting("`EULER_PROFILE`", "`default`", "the stored profile to use (same as `euler --profile NAME`)"),
            Setting(
                "`XDG_CONFIG_HOME`",
                "`~/.config`",
                "`euler login` writes `$XDG_CONFIG_HOME/euler/config.toml` (mode 0600)",
            ),
            Setting(
                "`EULER_DEBUG`", "unset", "`1`: tracebacks of unexpected errors and the websocket messages, on stderr"
            ),
            Setting(
                "`EULER_NODE_MAX_CONTAINER_LOG_BYTES`",
                "`67108864`",
                'most bytes the Docker engine keeps on disk for one job\'s log (json-file, 4 rotated files; at least 1 MiB) — see "Hostile jobs" below',
            ),
        ),
    ),
)


INTRO = """# Configuration

Generated from `euler/catalog.py` by `python -m euler.catalog > docs/configuration.md`; do not edit by hand
(`tests/docs/test_configuration.py` fails when this page and the code drift).

Everything is read from the environment; a bad value stops the process with a message naming the
variable. Every secret also accepts `NAME_FILE` (a path to a file holding it).
"""


def render() -> str:
    """The configuration page, one table per section."""
    parts = [INTRO]
    for title, settings in SECTIONS:
        parts.append(f"\n## {title}\n\n| variable | default | meaning |\n|---|---|---|\n")
        parts.extend(f"| {s.names} | {s.default} | {s.meaning} |\n" for s in settings)
    return "".join(parts)


if __name__ == "__main__":
    import sys

    sys.stdout.write(render())
