"""Celery tasks of the agents app."""

from celery import shared_task

from agents.health import run_checks


@shared_task(ignore_result=True)
def run_health_checks() -> int:
    return run_checks()
