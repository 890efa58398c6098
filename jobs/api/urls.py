from django.urls import path

from jobs.api import array_views, views

urlpatterns = [
    path("jobs", views.JobListCreateView.as_view(), name="job-list"),
    path("jobs/<id:job_id>", views.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<id:job_id>/cancel", views.JobCancelView.as_view(), name="job-cancel"),
    path("jobs/<id:job_id>/retry", views.JobRetryView.as_view(), name="job-retry"),
    path("priority-classes", views.PriorityClassListView.as_view(), name="priority-class-list"),
    path("arrays", array_views.ArrayListView.as_view(), name="array-list"),
    path("arrays/<id:array_id>", array_views.ArrayDetailView.as_view(), name="array-detail"),
    path("arrays/<id:array_id>/tasks", array_views.ArrayTasksView.as_view(), name="array-tasks"),
    path("arrays/<id:array_id>/cancel", array_views.ArrayCancelView.as_view(), name="array-cancel"),
    path("arrays/<id:array_id>/retry", array_views.ArrayRetryView.as_view(), name="array-retry"),
]
