"""Periodic quota work: flush invocation counters to the ledger."""

from celery import shared_task

from quotas import invocations


@shared_task(name="quotas.flush_invocations", ignore_result=True)
def flush_invocations() -> int:
    return invocations.flush()
