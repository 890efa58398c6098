from django.urls import path

from gateway import proxy
from gateway.api import views

# agents.api.urls comes first in euler/urls.py; its patterns end at <name> or /instances[/<id>],
# so neither /stats nor /invoke/... can be captured by them.
urlpatterns = [
    path("agents/<str:name>/stats", views.AgentStatsView.as_view(), name="agent-stats"),
    path("agents/<str:name>/invoke", proxy.invoke, name="agent-invoke-root"),
    path("agents/<str:name>/invoke/<path:path>", proxy.invoke, name="agent-invoke"),
]
