"""What every console page needs: the signed-in user's project and their role in it."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from quotas.models import Membership, Role
from quotas.selectors import session_project


def project_page(view):
    """Signed in and acting within a project: sets request.project and request.is_owner."""

    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        project = session_project(request)
        if project is None:
            return render(request, "console/no_project.html", status=200)
        request.project = project
        request.role = (
            Membership.objects.filter(project=project, user=request.user).values_list("role", flat=True).first()
        )
        request.is_owner = request.role == Role.OWNER
        return view(request, *args, **kwargs)

    return wrapper


def no_store(response: HttpResponse) -> HttpResponse:
    """Pages that show a secret once must never be kept by a cache or the back button."""
    response["Cache-Control"] = "no-store"
    return response


def error_message(exc) -> str:
    return getattr(exc, "message", None) or str(exc)
