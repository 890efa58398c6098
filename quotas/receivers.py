"""A membership that ends by any door (the admin, a deleted user) takes its keys with it."""

from __future__ import annotations

from django.db.models.signals import pre_delete
from django.dispatch import receiver

from quotas.models import Membership


@receiver(pre_delete, sender=Membership, dispatch_uid="quotas.membership_keys")
def revoke_keys_of_departing_member(sender, instance: Membership, **kwargs) -> None:
    # pre_delete: runs before a deleted user's keys lose their creator (SET_NULL) and would pass for an operator's.
    from quotas.services import apikeys_follow_member

    apikeys_follow_member(project_id=instance.project_id, user_id=instance.user_id, role=None, reason="member.removed")
