"""The Celery application: broker is Redis, periodic tasks come from settings.CELERY_BEAT_SCHEDULE."""

import os

from celery import Celery

from euler import kombu_guard

kombu_guard.install()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("euler", task_cls="euler.celerytask:EulerTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
