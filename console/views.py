"""Console pages (server-rendered)."""

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from quotas.models import Membership
from quotas.selectors import SESSION_PROJECT_KEY, project_summary, session_project


class LoginView(auth_views.LoginView):
    template_name = "console/login.html"
    redirect_authenticated_user = True


@login_required
def dashboard(request):
    project = session_project(request)
    summary = project_summary(project) if project else None
    return render(request, "console/dashboard.html", {"summary": summary})


@login_required
@require_POST
def switch_project(request):
    wanted = request.POST.get("project")
    if wanted and Membership.objects.filter(user=request.user, project_id=wanted).exists():
        request.session[SESSION_PROJECT_KEY] = int(wanted)
    return redirect(request.POST.get("next") or "/")


def oidc_settings_ok() -> bool:
    return settings.OIDC_ENABLED
