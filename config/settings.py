"""Euler settings: everything comes from the environment through the strict readers in env.py."""

from __future__ import annotations

import base64
import ipaddress
import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from euler.env import env_bool, env_float, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = Path(env_str("EULER_DATA_DIR", str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DJANGO_DEBUG", True)


def _generated_once(filename: str, make) -> str:
    """A development secret kept in the data dir so that restarts reuse it."""
    path = DATA_DIR / filename
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(make())
    return path.read_text().strip()


SECRET_KEY = env_secret("DJANGO_SECRET_KEY")
if SECRET_KEY is None:
    if not DEBUG:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY is required when DJANGO_DEBUG=False")
    SECRET_KEY = _generated_once("secret_key", lambda: secrets.token_urlsafe(50))

EULER_ENCRYPTION_KEYS = env_secret("EULER_ENCRYPTION_KEYS")
if EULER_ENCRYPTION_KEYS is None:
    if not DEBUG:
        raise ImproperlyConfigured("EULER_ENCRYPTION_KEYS is required when DJANGO_DEBUG=False")
    EULER_ENCRYPTION_KEYS = _generated_once(
        "encryption_keys", lambda: "dev1:" + base64.b64encode(secrets.token_bytes(32)).decode()
    )

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # daphne's app makes `manage.py runserver` serve ASGI (websockets); it imports Twisted (~0.4 s of CPU), so
    # only that command loads it: uvicorn, the workers and every other command start without it.
    *(["daphne"] if "runserver" in sys.argv[1:2] else []),
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "mozilla_django_oidc",
    "euler",
    "quotas",
    "nodes",
    "jobs",
    "jobs.outputs",
    "jobs.checkpoints",
    "agents",
    "gateway",
    "audit",
    "workflows",
    "services",
    "lending",
    "nodeagent",
    "console",
]

MIDDLEWARE = [
    "euler.observability.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "audit.context.AuditContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context.console",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------------------
_DEFAULT_DB = f"sqlite:///{DATA_DIR / 'euler.sqlite3'}"
try:
    DATABASES = {"default": dj_database_url.parse(env_secret("DATABASE_URL", _DEFAULT_DB), conn_max_age=0)}
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    # Every commit synced, as in the rollback-journal mode; `migrate` puts the file in WAL mode (euler/apps.py).
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA synchronous=FULL"
elif env_bool("EULER_DB_POOL", False):
    # Opt-in psycopg pool (Django requires CONN_MAX_AGE=0 with it). Off by default: threads that never
    # close their connection (executors, background flushers) would each pin one of the pool's slots.
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env_int("EULER_DB_POOL_MIN", 1, minimum=0),
        "max_size": env_int("EULER_DB_POOL_MAX", 20, minimum=1),
        "timeout": 10,
    }
# A Celery worker's processes keep their connection between tasks (euler/celery.py sets it when a worker starts):
# a task that opened one each time spent a fifth of its CPU connecting, and PostgreSQL forked a backend per task.
EULER_WORKER_DB_CONN_MAX_AGE = env_int("EULER_WORKER_DB_CONN_MAX_AGE", 300, minimum=0)
# Celery's Django fix-up would close each connection after every task whatever CONN_MAX_AGE says; with this it
# closes them every 1,000 tasks, and between, euler/celery.py closes those Django would (too old, broken).
CELERY_DB_REUSE_MAX = 1000
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis, celery, channels ----------------------------------------------------------------
EULER_EMBEDDED_REDIS_SOCKET = DATA_DIR / "redis.sock"
REDIS_URL = env_secret("REDIS_URL", f"unix://{EULER_EMBEDDED_REDIS_SOCKET}")
if not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(f"REDIS_URL must start with redis://, rediss:// or unix://, got {REDIS_URL!r}")
EULER_REDIS_EMBEDDED = env_secret("REDIS_URL") is None

if REDIS_URL.startswith("unix://"):
    _path, _, _query = REDIS_URL[len("unix://") :].partition("?")
    CELERY_BROKER_URL = f"redis+socket://{_path}" + (f"?{_query}" if _query else "")
else:
    CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = env_bool("EULER_CELERY_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BEAT_SCHEDULE: dict = {
    "quotas.flush_invocations": {"task": "quotas.flush_invocations", "schedule": 10.0},
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py's default 5 s read timeout equals channels_redis's 5 s BZPOPMIN: an idle websocket would die.
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": 15}],
            "prefix": "euler:ch",
            # Process-specific channels share one list per process (websocket consumers, the node tunnels' frames
            # and the gateway's answers from them: gateway/tunnel.py): its backlog, not one consumer's, is capped.
            # Each tunnel stream has at most protocol_tunnel.WINDOW frames in flight.
            "channel_capacity": {"specific.*": 1000},
        },
    }
}

# --- auth -----------------------------------------------------------------------------------
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_RP_CLIENT_SECRET")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT")
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "E时代通行证")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID and OIDC_OP_AUTHORIZATION_ENDPOINT and OIDC_OP_TOKEN_ENDPOINT)
if OIDC_ENABLED:
    _missing = [name for name in ("OIDC_RP_CLIENT_SECRET", "OIDC_OP_USER_ENDPOINT") if not globals().get(name)]
    if OIDC_RP_SIGN_ALGO.startswith("RS") and not OIDC_OP_JWKS_ENDPOINT:
        _missing.append("OIDC_OP_JWKS_ENDPOINT")
    if _missing:
        raise ImproperlyConfigured("OIDC is partly configured; also set " + ", ".join(_missing))
    AUTHENTICATION_BACKENDS.insert(0, "quotas.oidc.EulerOIDCBackend")
OIDC_USE_NONCE = True
OIDC_CREATE_USER = True

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
CSRF_COOKIE_SAMESITE = "Lax"
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("EULER_BEHIND_TLS_PROXY", False) else None
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- REST framework -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "quotas.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["quotas.api.base.HasProject"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "euler.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "quotas.api.base.Pagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
if DEBUG:
    REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"].append("rest_framework.renderers.BrowsableAPIRenderer")

from euler.converters import OPENAPI as ID_PATH_SCHEMA  # noqa: E402 - plain data, no Django imports

SPECTACULAR_SETTINGS = {
    "TITLE": "Euler API",
    "DESCRIPTION": "Euler (欧拉智算) compute control plane: jobs, nodes, agents, quotas.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "APPEND_COMPONENTS": {
        "securitySchemes": {
            "ApiKey": {"type": "apiKey", "in": "header", "name": "X-Euler-API-Key"},
        }
    },
    "SECURITY": [{"ApiKey": []}],
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "quotas.api.base.error_responses"],
    "PATH_CONVERTER_OVERRIDES": {"id": ID_PATH_SCHEMA},
}

# --- i18n, static ---------------------------------------------------------------------------
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_I18N = True
TIME_ZONE = "UTC"
USE_TZ = True
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"

# --- Euler ----------------------------------------------------------------------------------
EULER_METRICS_TOKEN = env_secret("EULER_METRICS_TOKEN")
EULER_AUTH_FAILURES_PER_MINUTE = env_int("EULER_AUTH_FAILURES_PER_MINUTE", 30, minimum=0)
EULER_AUTH_FAILURES_PER_ADDRESS_PER_MINUTE = env_int("EULER_AUTH_FAILURES_PER_ADDRESS_PER_MINUTE", 600, minimum=0)
EULER_LOGIN_FAILURES_PER_15_MINUTES = env_int("EULER_LOGIN_FAILURES_PER_15_MINUTES", 10, minimum=0)
EULER_TRUSTED_PROXIES = env_list("EULER_TRUSTED_PROXIES", [])
for _cidr in EULER_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_cidr, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"EULER_TRUSTED_PROXIES: {_cidr!r} is not an address or CIDR") from None
EULER_PUBLIC_URL = env_str("EULER_PUBLIC_URL", "http://127.0.0.1:8000")
EULER_FREE_QUOTA_CPU_CORE_SECONDS = env_int("EULER_FREE_QUOTA_CPU_CORE_SECONDS", 360_000, minimum=0)
EULER_FREE_QUOTA_GPU_SECONDS = env_int("EULER_FREE_QUOTA_GPU_SECONDS", 36_000, minimum=0)
EULER_FREE_QUOTA_INVOCATIONS = env_int("EULER_FREE_QUOTA_INVOCATIONS", 100_000, minimum=0)
EULER_FREE_QUOTA_CONCURRENT_JOBS = env_int("EULER_FREE_QUOTA_CONCURRENT_JOBS", 1000, minimum=0)
EULER_FREE_QUOTA_API_KEYS = env_int("EULER_FREE_QUOTA_API_KEYS", 20, minimum=0)
EULER_QUOTA_GRACE = env_float("EULER_QUOTA_GRACE", 0.05, minimum=0)

# Each app reads its own variables in <app>/conf.py; they are merged here, beat schedules too.
from agents import conf as _agents_conf  # noqa: E402
from gateway import conf as _gateway_conf  # noqa: E402
from jobs import conf as _jobs_conf  # noqa: E402
from lending import conf as _lending_conf  # noqa: E402
from nodes import conf as _nodes_conf  # noqa: E402
from services import conf as _services_conf  # noqa: E402
from workflows import conf as _workflows_conf  # noqa: E402

for _conf in (_nodes_conf, _jobs_conf, _agents_conf, _gateway_conf, _workflows_conf, _lending_conf, _services_conf):
    for _name in dir(_conf):
        if _name.startswith("EULER_"):
            globals()[_name] = getattr(_conf, _name)
    CELERY_BEAT_SCHEDULE.update(_conf.BEAT_SCHEDULE)

# Job outputs: the filesystem or an S3-compatible bucket (jobs/outputs/conf.py), as storages["outputs"].
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "outputs": EULER_OUTPUTS_STORAGE,  # noqa: F821 - from jobs/conf.py
}

# --- retention and log compaction (euler/retention.py and each app's retention.py, jobs/logstore.py) ---------------------------
# Ended jobs (attempts, events, logs) and node events older than this many days are removed; 0 keeps them.
EULER_JOB_RETENTION_DAYS = env_int("EULER_JOB_RETENTION_DAYS", 30, minimum=0)
# Audit events older than this many days are removed; 0 keeps them.
EULER_AUDIT_RETENTION_DAYS = env_int("EULER_AUDIT_RETENTION_DAYS", 365, minimum=0)
# Rows deleted per transaction by the retention pass (each batch is one short transaction).
EULER_RETENTION_BATCH = env_int("EULER_RETENTION_BATCH", 500, minimum=1, maximum=100_000)
# An ended attempt's log chunks are compacted into one compressed row this many seconds after it ended.
EULER_LOG_COMPACT_AFTER = env_int("EULER_LOG_COMPACT_AFTER", 300, minimum=0)
CELERY_BEAT_SCHEDULE["euler-purge-expired"] = {"task": "euler.tasks.purge_expired", "schedule": 3600.0}
CELERY_BEAT_SCHEDULE["euler-compact-logs"] = {"task": "jobs.tasks.compact_logs", "schedule": 60.0}

# --- where tasks run and how long they may take (euler/taskpolicy.py, euler/celerytask.py) ----------------
from kombu import Exchange as _Exchange  # noqa: E402
from kombu import Queue as _Queue  # noqa: E402

from euler import taskpolicy as _taskpolicy  # noqa: E402 - plain data, no Django imports

_TASKS = _taskpolicy.policies(health_deadline=EULER_AGENT_HEALTH_DEADLINE)  # noqa: F821 - from agents/conf.py
# A worker started without -Q serves every queue; `make up` and compose start one for `control` alone.
CELERY_TASK_QUEUES = [_Queue(name, _Exchange(name), routing_key=name) for name in _taskpolicy.QUEUES]
CELERY_TASK_DEFAULT_QUEUE = _taskpolicy.DEFAULT_QUEUE
CELERY_TASK_ROUTES = _taskpolicy.routes(_TASKS)
CELERY_TASK_ANNOTATIONS = _taskpolicy.annotations(_TASKS)
# Tasks missing from the table (there should be none: a test checks) still get limits.
CELERY_TASK_SOFT_TIME_LIMIT = 300
CELERY_TASK_TIME_LIMIT = 360
EULER_SINGLE_FLIGHT_TASKS = _taskpolicy.single_flight(_TASKS)
CELERY_BEAT_SCHEDULE = _taskpolicy.with_expiry(CELERY_BEAT_SCHEDULE)
# A pool process whose resident memory passes this (MiB) is replaced after its current task.
EULER_WORKER_MAX_MEMORY_MB = env_int("EULER_WORKER_MAX_MEMORY_MB", 512, minimum=64)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = EULER_WORKER_MAX_MEMORY_MB * 1024  # KiB, as Celery counts it

EULER_LOG_FORMAT = env_str("EULER_LOG_FORMAT", "plain" if DEBUG else "json")
if EULER_LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(f"EULER_LOG_FORMAT must be plain or json, got {EULER_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "euler.observability.RequestIdFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {"()": "euler.observability.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": EULER_LOG_FORMAT, "filters": ["request_id"]}
    },
    "root": {"handlers": ["console"], "level": env_str("EULER_LOG_LEVEL", "INFO")},
    "loggers": {"django.request": {"level": "ERROR"}, "daphne": {"level": "WARNING"}},
}

SESSION_COOKIE_AGE = int(timedelta(days=14).total_seconds())
