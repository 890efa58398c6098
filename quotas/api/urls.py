from django.urls import path

from quotas.api import members, usage, views

urlpatterns = [
    path("project", views.ProjectView.as_view(), name="project"),
    path("usage", usage.UsageView.as_view(), name="usage"),
    path("api-keys", views.ApiKeyListView.as_view(), name="api-keys"),
    path("api-keys/<id:key_id>", views.ApiKeyDetailView.as_view(), name="api-key-detail"),
    path("project/invitations", members.InvitationListView.as_view(), name="invitations"),
    path("project/invitations/<id:invitation_id>", members.InvitationDetailView.as_view(), name="invitation-detail"),
    path("project/members", members.MemberListView.as_view(), name="members"),
    path("project/members/<id:user_id>", members.MemberDetailView.as_view(), name="member-detail"),
]
