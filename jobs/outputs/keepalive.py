"""Outputs on their way keep their attempt alive: the server's deadline backstop (jobs.attempts.deadlines_expire)
would otherwise fail an attempt whose job ended near its timeout while the agent still uploads what it left."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from jobs.models import Attempt
from jobs.states import ATTEMPT_ACTIVE


def extend_deadline(*, attempt_id: int, now: datetime | None = None) -> None:
    """After a manifest, a chunk or a done call: the backstop waits at least EULER_JOB_TIMEOUT_GRACE from now."""
    until = (now or timezone.now()) + timedelta(seconds=settings.EULER_JOB_TIMEOUT_GRACE)
    Attempt.objects.filter(pk=attempt_id, state__in=ATTEMPT_ACTIVE, deadline_at__lt=until).update(deadline_at=until)
