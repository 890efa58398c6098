"""Activity: the project's audit trail for its owners, newest first, filtered by kind of action."""

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _

from audit import selectors
from console.views.common import no_store, project_page

PAGE_SIZE = 50
# The filter offers families of actions (the part before the dot), each with a label.
FAMILIES = [
    ("node.", _("Nodes")),
    ("enrollment_token.", _("Enrollment tokens")),
    ("api_key.", _("API keys")),
    ("invitation.", _("Invitations")),
    ("member.", _("Members")),
    ("quota.", _("Quota")),
    ("agent.", _("Agents")),
    ("job.", _("Jobs")),
]


@project_page
def activity(request):
    if not request.is_owner:
        raise PermissionDenied
    family = request.GET.get("action", "")
    if family not in dict(FAMILIES):
        family = ""
    events = selectors.events_of(request.project, action=family or None)
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "families": FAMILIES, "family": family}
    return no_store(render(request, "console/activity.html", context))
