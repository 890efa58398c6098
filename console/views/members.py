"""Members and one-time invitation links: owners invite, change roles and remove members."""

from datetime import timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.views.common import error_message, no_store, project_page
from euler.errors import EulerError
from quotas import invitations, members
from quotas.models import Role


def _page(request, **extra):
    now = timezone.now()
    invites = [(inv, inv.state(now)) for inv in invitations.invitations_for(request.project)[:100]]
    context = {
        "members": members.members_of(request.project),
        "invitations": invites,
        "roles": Role.choices,
        "is_owner": request.is_owner,
        **extra,
    }
    return no_store(render(request, "console/members.html", context))


def _owner_only(request) -> None:
    if not request.is_owner:
        raise PermissionDenied


@project_page
def members_page(request):
    """GET lists; POST creates an invitation (the no-JS path: the link is in this one response only)."""
    if request.method != "POST":
        return _page(request)
    _owner_only(request)
    try:
        days = int(request.POST.get("expires_in_days") or 7)
        new = invitations.invitation_create(
            project=request.project,
            role=request.POST.get("role", Role.MEMBER),
            ttl=timedelta(days=days),
            by=request.user,
        )
    except (EulerError, ValueError, OverflowError) as exc:
        return _page(
            request, invite_error=error_message(exc) if isinstance(exc, EulerError) else _("Invalid number of days.")
        )
    return _page(request, new_link=new.url)


@project_page
@require_POST
def invitation_revoke(request, invitation_id: int):
    _owner_only(request)
    try:
        invitations.invitation_revoke(project=request.project, invitation_id=invitation_id)
        messages.success(request, _("Invitation revoked."))
    except EulerError as exc:
        messages.error(request, error_message(exc))
    return redirect("members")


@project_page
@require_POST
def member_role(request, user_id: int):
    _owner_only(request)
    try:
        m = members.member_change_role(project=request.project, user_id=user_id, role=request.POST.get("role", ""))
        messages.success(
            request, _("%(user)s is now %(role)s.") % {"user": m.user.get_username(), "role": m.get_role_display()}
        )
    except EulerError as exc:
        messages.error(request, error_message(exc))
    return redirect("members")


@project_page
@require_POST
def member_remove(request, user_id: int):
    _owner_only(request)
    try:
        members.member_remove(project=request.project, user_id=user_id)
        messages.success(request, _("Member removed."))
    except EulerError as exc:
        messages.error(request, error_message(exc))
    return redirect("members")
