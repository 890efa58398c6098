from django.urls import path

from nodeagent import protocol
from nodes.node_api import views

urlpatterns = [
    path(protocol.PATH_ENROLL, views.EnrollView.as_view(), name="node-enroll"),
    path(protocol.PATH_HEARTBEAT, views.heartbeat, name="node-heartbeat"),
    path(protocol.PATH_POLL, views.poll, name="node-poll"),
    path("credential/rotate", views.RotateCredentialView.as_view(), name="node-credential-rotate"),
    path(protocol.PATH_RECLAIM, views.ReclaimView.as_view(), name="node-reclaim-self"),
    path(protocol.PATH_RESUME, views.ResumeView.as_view(), name="node-resume-self"),
    path(protocol.PATH_TERMS, views.TermsView.as_view(), name="node-terms-self"),
]
