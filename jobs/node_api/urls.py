from django.urls import path

from jobs.node_api import logs, reports

urlpatterns = [
    path("attempts/<int:attempt_id>/report", reports.AttemptReportView.as_view(), name="node-attempt-report"),
    path("attempts/<int:attempt_id>/logs", logs.AttemptLogsView.as_view(), name="node-attempt-logs"),
]
