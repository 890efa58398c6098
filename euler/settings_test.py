"""Settings for unit tests: the real database and Redis from the environment, in-memory channel layer."""

import os

os.environ.setdefault("DJANGO_DEBUG", "true")

from euler.settings import *  # noqa: E402,F403

CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
CELERY_TASK_ALWAYS_EAGER = True
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]  # noqa: F405
