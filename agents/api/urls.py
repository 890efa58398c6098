from django.urls import path

from agents.api import views

# Names never hold '/', so these cannot shadow gateway's agents/<name>/invoke/... and /stats routes.
urlpatterns = [
    path("agents", views.AgentListView.as_view(), name="agents"),
    path("agents/<str:name>", views.AgentDetailView.as_view(), name="agent-detail"),
    path("agents/<str:name>/instances", views.InstanceListView.as_view(), name="agent-instances"),
    path("agents/<str:name>/instances/<id:instance_id>", views.InstanceDetailView.as_view(), name="agent-instance"),
]
