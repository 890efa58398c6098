"""One-time invitation links to a project: create, look up, accept, revoke; only SHA-256 digests are stored."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from euler import tokens
from euler.errors import Conflict, EulerError, InvalidInput, NotFound, QuotaExceeded
from quotas.models import Invitation, Membership, Project, Role

INVITATION_PREFIX = "euler_inv_"
DEFAULT_TTL = timedelta(days=7)
MAX_TTL = timedelta(days=90)
MAX_OPEN_PER_PROJECT = 50


class InvitationClosed(EulerError):
    """The link exists but can no longer be used: used, expired or revoked."""

    code = "invitation_closed"
    status_code = 410


@dataclass(frozen=True)
class NewInvitation:
    invitation: Invitation
    token: str

    @property
    def url(self) -> str:
        return join_url(self.token)


def join_url(token: str) -> str:
    return f"{settings.EULER_PUBLIC_URL.rstrip('/')}/join/{token}"


def validate_role(role: str) -> str:
    if role not in Role.values:
        raise InvalidInput(f"A role is one of {', '.join(Role.values)}.", code="invalid_role")
    return role


def invitation_create(
    *, project: Project, role: str = Role.MEMBER, ttl: timedelta = DEFAULT_TTL, by=None
) -> NewInvitation:
    """A new link; the token is returned once and only its digest is kept."""
    validate_role(role)
    if ttl <= timedelta(0) or ttl > MAX_TTL:
        raise InvalidInput(f"An invitation lasts at most {MAX_TTL.days} days.", code="invalid_ttl")
    now = timezone.now()
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).first()
        open_count = Invitation.objects.filter(
            project=project, used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now
        ).count()
        if open_count >= MAX_OPEN_PER_PROJECT:
            raise QuotaExceeded(
                f"The project already has {open_count} open invitations; revoke some first.",
                code="too_many_invitations",
            )
        new = tokens.make(INVITATION_PREFIX)
        invitation = Invitation.objects.create(
            project=project,
            role=role,
            prefix=new.lookup,
            token_hash=new.digest,
            created_by=by if getattr(by, "pk", None) else None,
            expires_at=now + ttl,
        )
        audit.record(
            "invitation.created",
            project=project,
            target=f"invitation:{invitation.pk}",
            details={"role": role, "expires_at": invitation.expires_at},
            by=by,
        )
    return NewInvitation(invitation=invitation, token=new.secret)


def invitation_lookup(*, token: str) -> Invitation:
    """The invitation behind a presented token, whatever its state; NotFound when none matches."""
    lookup = tokens.split(INVITATION_PREFIX, token or "")
    invitation = None
    if lookup is not None:
        invitation = Invitation.objects.select_related("project").filter(prefix=lookup).first()
    if invitation is None or not tokens.matches(token, invitation.token_hash):
        raise NotFound("This invitation link is not valid.", code="invitation_not_found")
    return invitation


def _closed(invitation: Invitation, now) -> InvitationClosed:
    state = invitation.state(now)
    messages = {
        "used": "This invitation link has already been used.",
        "expired": "This invitation link has expired.",
        "revoked": "This invitation link has been revoked.",
    }
    return InvitationClosed(messages.get(state, "This invitation link is closed."), code=f"invitation_{state}")


def invitation_accept(*, token: str, user) -> Membership:
    """Join the invitation's project. Single use: a conditional UPDATE lets exactly one caller win."""
    invitation = invitation_lookup(token=token)
    now = timezone.now()
    if invitation.state(now) != "open":
        raise _closed(invitation, now)
    if Membership.objects.filter(project_id=invitation.project_id, user=user).exists():
        # The link stays open so that the owner can still hand it to someone who is not a member.
        raise Conflict(f"You are already a member of {invitation.project.name}.", code="already_member")
    try:
        with transaction.atomic():
            won = Invitation.objects.filter(
                pk=invitation.pk, used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now
            ).update(used_at=now, used_by=user)
            if won != 1:
                invitation.refresh_from_db()
                raise _closed(invitation, now)
            membership = Membership.objects.create(project_id=invitation.project_id, user=user, role=invitation.role)
            audit.record(
                "invitation.used",
                project=invitation.project,
                target=f"invitation:{invitation.pk}",
                details={"role": invitation.role, "user": user.get_username()},
                by=user,
            )
            return membership
    except IntegrityError:
        raise Conflict(f"You are already a member of {invitation.project.name}.", code="already_member") from None


@transaction.atomic
def invitation_revoke(*, project: Project, invitation_id: int) -> Invitation:
    invitation = Invitation.objects.filter(project=project, pk=invitation_id).first()
    if invitation is None:
        raise NotFound("No such invitation.", code="not_found")
    if invitation.used_at is not None:
        raise Conflict("This invitation has already been used; remove the member instead.", code="invitation_used")
    if invitation.revoked_at is None:
        Invitation.objects.filter(pk=invitation.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        audit.record("invitation.revoked", project=project, target=f"invitation:{invitation.pk}")
        invitation.refresh_from_db()
    return invitation


def invitations_for(project: Project):
    return Invitation.objects.filter(project=project).select_related("created_by", "used_by")
