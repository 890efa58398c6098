"""Settings for unit tests: the real database and Redis from the environment, in-memory channel layer."""

import os

os.environ.setdefault("DJANGO_DEBUG", "true")

from config.settings import *  # noqa: E402,F403

CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
CELERY_TASK_ALWAYS_EAGER = True
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]  # noqa: F405

# A test database per test run, so parallel runs (several developers, CI) never clobber each other.
_TEST_DB_SUFFIX = os.environ.get("EULER_TEST_DB_SUFFIX", str(os.getpid()))
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-{_TEST_DB_SUFFIX}.sqlite3")}  # noqa: F405
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_euler_{_TEST_DB_SUFFIX}"}  # noqa: F405

# Auth-failure rate limits are exercised by their own tests; elsewhere they would make results
# depend on how many 401s the suite happened to produce within a minute.
EULER_AUTH_FAILURES_PER_MINUTE = 0
