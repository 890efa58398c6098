"""Nodes: the project's own machines with capacity bars, enrollment tokens, the public pool."""

from django.conf import settings
from django.shortcuts import render
from django.utils.translation import gettext as _

from console import sources
from console.present import node_command
from console.views.common import error_message, no_store, project_page
from euler.errors import EulerError


@project_page
def nodes(request):
    context = {"nodes": sources.nodes_for(request.project)}
    if request.method == "POST" and context["nodes"] is not None:
        from nodes import services

        try:
            ttl_hours = int(request.POST.get("ttl_hours") or 24)
            token, secret = services.enrollment_token_create(
                project=request.project,
                trust=request.POST.get("trust") or "untrusted",
                ttl=ttl_hours * 3600,
                region=request.POST.get("region", "").strip(),
                label=request.POST.get("label", "").strip(),
                by=request.user,
            )
        except EulerError as exc:
            context["token_error"] = error_message(exc)
        except (ValueError, OverflowError):
            context["token_error"] = _("The expiry is a whole number of hours.")
        else:
            context["new_token"] = secret
            context["new_command"] = node_command(public_url=settings.EULER_PUBLIC_URL, token=secret)
    if context["nodes"] is not None:
        from nodes.models import EnrollmentToken

        context["tokens"] = EnrollmentToken.objects.filter(project=request.project)[:50]
    return no_store(render(request, "console/nodes.html", context))
