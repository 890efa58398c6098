"""A membership that ends by any door (the API, the admin, a deleted user) disables the schedules its member
created in the project: they would keep submitting jobs as someone who is no longer there."""

from __future__ import annotations

from django.db.models.signals import pre_delete
from django.dispatch import receiver

from quotas.models import Membership


@receiver(pre_delete, sender=Membership, dispatch_uid="workflows.membership_schedules")
def disable_schedules_of_departing_member(sender, instance: Membership, **kwargs) -> None:
    # pre_delete, like the keys' receiver (quotas/receivers.py): a deleted user's schedules still name their
    # creator here (created_by is SET_NULL afterwards), and this runs in the removal's transaction.
    from workflows.schedules import schedules_of_departed_member

    user = instance.user
    schedules_of_departed_member(
        project_id=instance.project_id, user_id=instance.user_id, username=user.get_username() if user else ""
    )
