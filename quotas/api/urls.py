from django.urls import path

from quotas.api import views

urlpatterns = [
    path("project", views.ProjectView.as_view(), name="project"),
    path("api-keys", views.ApiKeyListView.as_view(), name="api-keys"),
    path("api-keys/<int:key_id>", views.ApiKeyDetailView.as_view(), name="api-key-detail"),
]
