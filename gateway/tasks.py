"""Celery tasks of the gateway app."""

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone


@shared_task(ignore_result=True)
def prune_invocations() -> int:
    """Delete invocation records older than EULER_GATEWAY_RETENTION_DAYS, in batches."""
    from gateway.models import Invocation

    cutoff = timezone.now() - timedelta(days=settings.EULER_GATEWAY_RETENTION_DAYS)
    total = 0
    while True:
        ids = list(Invocation.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True)[:5000])
        if not ids:
            return total
        total += Invocation.objects.filter(pk__in=ids).delete()[0]
