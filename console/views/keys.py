"""API keys: list, create (the secret shown once), revoke."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.views.common import error_message, no_store, project_page
from euler.errors import EulerError
from quotas import services
from quotas.models import ApiKey, Role
from quotas.roles import allows


def _page(request, **extra):
    keys = ApiKey.objects.filter(project=request.project).select_related("created_by")
    context = {"keys": keys, "roles": [(v, label) for v, label in Role.choices if allows(request.role, v)], **extra}
    return no_store(render(request, "console/keys.html", context))


@project_page
def keys(request):
    """GET lists; POST creates (the no-JS path: the secret is in this one response, never stored)."""
    if request.method == "POST":
        try:
            key, secret = services.apikey_create(
                project=request.project,
                label=request.POST.get("label", ""),
                by=request.user,
                role=request.POST.get("role") or None,
                cap=request.role,
            )
        except EulerError as exc:
            return _page(request, create_error=error_message(exc))
        return _page(request, new_secret=secret, new_key=key)
    return _page(request)


@project_page
@require_POST
def key_revoke(request, key_id: int):
    try:
        key = services.apikey_revoke(project=request.project, key_id=key_id, by=request.user, role=request.role)
    except EulerError as exc:
        messages.error(request, error_message(exc))
    else:
        messages.success(request, _("API key %(label)s revoked.") % {"label": key.label or key.prefix})
    return redirect("keys")
