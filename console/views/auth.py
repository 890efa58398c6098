"""Sign-in, project switch, and the /join/{token} page of one-time invitation links."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

import audit
from audit import context as audit_context
from console.views.common import error_message, no_store
from euler import ratelimit
from euler.errors import Conflict, NotFound
from quotas import invitations
from quotas.invitations import InvitationClosed
from quotas.models import Membership
from quotas.selectors import SESSION_PROJECT_KEY

LOGIN_WINDOW = 15 * 60
LOGIN_ADDRESS_FACTOR = 10  # one address may fail for many accounts (a lab's NAT) before it is held back


class ThrottledAuthenticationForm(AuthenticationForm):
    """Password sign-in with failures counted per (address, username), and per address at 10x the rate:
    past the limit even the right password waits, and the refusal is in the audit trail."""

    def clean(self):
        username = str(self.cleaned_data.get("username") or "")[:150]
        ip = ratelimit.client_ip(self.request) if self.request is not None else "unknown"
        limit = settings.EULER_LOGIN_FAILURES_PER_15_MINUTES
        buckets = [("login", f"{ip}|{username.lower()}", limit), ("login-addr", ip, limit * LOGIN_ADDRESS_FACTOR)]
        try:
            for bucket, who, most in buckets:
                ratelimit.check(bucket, who, limit=most, window=LOGIN_WINDOW)
        except ratelimit.RateLimited as exc:
            self.retry_after = exc.extra["retry_after"]
            minutes = max(1, -(-self.retry_after // 60))
            with audit_context.acting(audit_context.ANONYMOUS, ip=ip):
                audit.record(
                    "login.throttled", target=f"user:{username}" if username else "", details={"minutes": minutes}
                )
            self.throttled_message = _("Too many failed sign-ins. Wait %(minutes)s minutes and try again.") % {
                "minutes": minutes
            }
            raise ValidationError(self.throttled_message, code="rate_limited") from None
        try:
            return super().clean()
        except ValidationError:
            for bucket, who, _most in buckets:
                ratelimit.spend(bucket, who, window=LOGIN_WINDOW)
            raise


class LoginView(auth_views.LoginView):
    template_name = "console/login.html"
    redirect_authenticated_user = True
    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if getattr(form, "retry_after", None):
            response.status_code = 429
            response["Retry-After"] = str(form.retry_after)
        return response


def _safe_next(request, fallback: str = "/") -> str:
    wanted = request.POST.get("next") or fallback
    if url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return wanted
    return fallback


@login_required
@require_POST
def switch_project(request):
    wanted = request.POST.get("project", "")
    if wanted.isdigit() and Membership.objects.filter(user=request.user, project_id=int(wanted)).exists():
        request.session[SESSION_PROJECT_KEY] = int(wanted)
    return redirect(_safe_next(request))


_CLOSED_TEXT = {
    "invitation_used": lambda: _("This invitation link has already been used."),
    "invitation_expired": lambda: _("This invitation link has expired."),
    "invitation_revoked": lambda: _("This invitation link has been revoked."),
}


@require_http_methods(["GET", "POST"])
def join(request, token: str):
    """GET shows what the link offers (never consumes it, so link previews are harmless); POST joins."""
    context = {"token": token, "invitation": None, "problem": None}
    # Links are guessable only by brute force: unknown tokens are counted per address, then 429.
    limit, window = ratelimit.auth_failure_limit()
    who = ratelimit.client_ip(request)
    try:
        ratelimit.check("join", who, limit=limit, window=window)
    except ratelimit.RateLimited as exc:
        context["problem"] = _("Too many attempts; wait a minute and try again.")
        response = render(request, "console/join.html", context, status=429)
        response["Retry-After"] = str(exc.extra["retry_after"])
        return no_store(response)
    try:
        invitation = invitations.invitation_lookup(token=token)
    except NotFound:
        ratelimit.spend("join", who, window=window)
        context["problem"] = _("This invitation link is not valid.")
        return no_store(render(request, "console/join.html", context, status=404))
    context["invitation"] = invitation
    state = invitation.state(timezone.now())
    if state != "open":
        context["problem"] = _CLOSED_TEXT[f"invitation_{state}"]()
        return no_store(render(request, "console/join.html", context, status=410))
    if request.user.is_authenticated:
        context["already_member"] = Membership.objects.filter(project=invitation.project, user=request.user).exists()
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect(f"/login/?next=/join/{token}")
        try:
            membership = invitations.invitation_accept(token=token, user=request.user)
        except InvitationClosed as exc:
            closed = _CLOSED_TEXT.get(exc.code)
            context["problem"] = closed() if closed else error_message(exc)
            return no_store(render(request, "console/join.html", context, status=410))
        except Conflict:
            context["problem"] = _("You are already a member of this project.")
            return no_store(render(request, "console/join.html", context, status=409))
        request.session[SESSION_PROJECT_KEY] = membership.project_id
        messages.success(request, _("You joined %(project)s.") % {"project": membership.project.name})
        return redirect("/")
    return no_store(render(request, "console/join.html", context))
