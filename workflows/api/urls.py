from django.urls import path

from workflows.api import views

urlpatterns = [
    path("schedules", views.ScheduleListView.as_view(), name="schedules"),
    path("schedules/<str:name>", views.ScheduleDetailView.as_view(), name="schedule-detail"),
    path("schedules/<str:name>/runs", views.ScheduleRunsView.as_view(), name="schedule-runs"),
    path("webhooks", views.WebhookListView.as_view(), name="webhooks"),
    path("webhooks/<id:hook_id>", views.WebhookDetailView.as_view(), name="webhook-detail"),
    path("webhooks/<id:hook_id>/deliveries", views.DeliveryListView.as_view(), name="webhook-deliveries"),
    path(
        "webhooks/<id:hook_id>/deliveries/<id:delivery_id>/redeliver",
        views.RedeliverView.as_view(),
        name="webhook-redeliver",
    ),
]
