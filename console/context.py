"""Template context shared by every console page."""

from django.conf import settings


def console(request):
    project = None
    projects = []
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        from quotas.selectors import session_project, user_projects

        project = session_project(request)
        projects = list(user_projects(user))
    return {
        "oidc_enabled": settings.OIDC_ENABLED,
        "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
        "current_project": project,
        "user_projects": projects,
    }
