"""Settings for unit tests: the real database and Redis from the environment, in-memory channel layer.

Every test process (the one of a serial run, or each pytest-xdist worker `gwN` of `make test`) gets its own
database (pytest-django suffixes its name with `_gwN`), its own Redis database number (REDIS_URL's plus N: see
_worker_redis_url) and its own data directory (a temporary one, removed when the process exits), so that workers
never see each other's rows, Redis keys or files. Ports: tests/ports.py; Docker: containers carry random node
names and each agent's owner id.
"""

import atexit
import os
import re
import shutil
import tempfile

os.environ.setdefault("DJANGO_DEBUG", "true")

# xdist sets PYTEST_XDIST_WORKER (gw0, gw1, ...) in each worker before it imports these settings; a process that a
# test starts inherits it, and with it the worker's data directory.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_WORKER_INDEX = int(_WORKER[2:]) if re.fullmatch(r"gw\d+", _WORKER) else None
REDIS_DATABASES = 16  # redis-server's default `databases`


def _worker_redis_url(url: str, index: int) -> str:
    """redis://host:port/N -> redis://host:port/(N + index): worker gwI gets the I-th database from REDIS_URL's."""
    base, sep, tail = url.partition("?")
    m = re.fullmatch(r"(rediss?://[^/]*)(?:/(\d*))?", base)
    if not m:
        return url  # unix:// (the embedded Redis): each worker's own socket under its own data directory
    db = int(m.group(2) or 0) + index
    if db >= REDIS_DATABASES:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"pytest-xdist worker {_WORKER} would use Redis database {db} (REDIS_URL {url!r} plus the worker's index),"
            f" past the server's {REDIS_DATABASES}: run fewer workers (-n) or give REDIS_URL a lower database number"
        )
    return f"{m.group(1)}/{db}{sep}{tail}"


if os.environ.get("EULER_TEST_DATA_DIR_OF") != (_WORKER or "main") or not os.environ.get("EULER_TEST_DATA_DIR"):
    # Short, under /tmp: the embedded Redis socket (REDIS_URL unset) lives in it.
    _data_dir = tempfile.mkdtemp(prefix=f"eut-{_WORKER or 'main'}-")
    atexit.register(shutil.rmtree, _data_dir, True)
    os.environ.update(EULER_TEST_DATA_DIR=_data_dir, EULER_TEST_DATA_DIR_OF=_WORKER or "main")
    if _WORKER_INDEX is not None and os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = _worker_redis_url(os.environ["REDIS_URL"], _WORKER_INDEX)
os.environ["EULER_DATA_DIR"] = os.environ["EULER_TEST_DATA_DIR"]

from config.settings import *  # noqa: E402,F403

CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
CELERY_TASK_ALWAYS_EAGER = True
# The tests' submits are placed by the eager task in their own thread and transaction, never by a thread of the
# test process (tests/e2e run the platform's real processes, where a submit's web process runs the pass).
EULER_SCHEDULE_ON_SUBMIT_MAX = 0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]  # noqa: F405

# A test database per test run, so parallel runs (several developers, CI) never clobber each other; pytest-django
# adds `_gwN` for each xdist worker.
_TEST_DB_SUFFIX = os.environ.get("EULER_TEST_DB_SUFFIX", str(os.getpid()))
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-{_TEST_DB_SUFFIX}.sqlite3")}  # noqa: F405
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_euler_{_TEST_DB_SUFFIX}"}  # noqa: F405

# Auth-failure rate limits are exercised by their own tests; elsewhere they would make results
# depend on how many 401s the suite happened to produce within a minute.
EULER_AUTH_FAILURES_PER_MINUTE = 0
