"""Celery tasks of the services app."""

from celery import shared_task

from services.controller import run_pass


@shared_task(ignore_result=True)
def reconcile_services() -> int:
    return run_pass()
