from django.urls import path

from gateway import proxy
from gateway.api import views
from quotas.access import declare, member

# Any project member may call its agents (the role checks live in gateway.auth, which authenticates itself).
invoke = declare(**{m: member() for m in ("get", "post", "put", "patch", "delete")})(proxy.invoke)

# agents.api.urls comes first in config/urls.py; its patterns end at <name> or /instances[/<id>],
# so neither /stats nor /invoke/... can be captured by them.
urlpatterns = [
    path("agents/<str:name>/stats", views.AgentStatsView.as_view(), name="agent-stats"),
    path("agents/<str:name>/invoke", invoke, name="agent-invoke-root"),
    path("agents/<str:name>/invoke/<path:path>", invoke, name="agent-invoke"),
]
