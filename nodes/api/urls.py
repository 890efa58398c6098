from django.urls import path

from nodes.api import views

urlpatterns = [
    path("nodes", views.NodeListView.as_view(), name="nodes"),
    path("nodes/enrollment-tokens", views.EnrollmentTokenListView.as_view(), name="enrollment-tokens"),
    path(
        "nodes/enrollment-tokens/<id:token_id>",
        views.EnrollmentTokenDetailView.as_view(),
        name="enrollment-token-detail",
    ),
    path("nodes/<id:node_id>", views.NodeDetailView.as_view(), name="node-detail"),
    path("nodes/<id:node_id>/reclaim", views.NodeReclaimView.as_view(), name="node-reclaim"),
    path("nodes/<id:node_id>/resume", views.NodeResumeView.as_view(), name="node-resume"),
]
