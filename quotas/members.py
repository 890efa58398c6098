"""Project members: list, change a role, remove; a project always keeps at least one owner."""

from __future__ import annotations

from django.db import transaction

import audit
from euler.errors import Conflict, NotFound
from quotas.invitations import validate_role
from quotas.models import Membership, Project, Role
from quotas.services import apikeys_follow_member


def members_of(project: Project):
    return Membership.objects.filter(project=project).select_related("user").order_by("created_at", "id")


def _locked_membership(project: Project, user_id: int) -> Membership:
    # Locking the project row serialises member changes, so two owners cannot demote each other at once.
    Project.objects.select_for_update().filter(pk=project.pk).first()
    membership = Membership.objects.select_related("user").filter(project=project, user_id=user_id).first()
    if membership is None:
        raise NotFound("No such member.", code="not_found")
    return membership


def _is_last_owner(membership: Membership) -> bool:
    if membership.role != Role.OWNER:
        return False
    return (
        not Membership.objects.filter(project_id=membership.project_id, role=Role.OWNER)
        .exclude(pk=membership.pk)
        .exists()
    )


@transaction.atomic
def member_change_role(*, project: Project, user_id: int, role: str) -> Membership:
    validate_role(role)
    membership = _locked_membership(project, user_id)
    if membership.role == role:
        return membership
    if _is_last_owner(membership):
        raise Conflict("The last owner cannot be demoted; make someone else an owner first.", code="last_owner")
    before, membership.role = membership.role, role
    membership.save(update_fields=["role"])
    audit.record(
        "member.role_changed",
        project=project,
        target=f"user:{membership.user.get_username()}",
        details={"from": before, "to": role},
    )
    apikeys_follow_member(project_id=project.pk, user_id=user_id, role=role, reason="member.role_changed")
    return membership


@transaction.atomic
def member_remove(*, project: Project, user_id: int) -> None:
    membership = _locked_membership(project, user_id)
    if _is_last_owner(membership):
        raise Conflict("The last owner cannot be removed; make someone else an owner first.", code="last_owner")
    apikeys_follow_member(project_id=project.pk, user_id=user_id, role=None, reason="member.removed")
    membership.delete()
    audit.record(
        "member.removed",
        project=project,
        target=f"user:{membership.user.get_username()}",
        details={"role": membership.role},
    )
