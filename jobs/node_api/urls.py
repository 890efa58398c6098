from django.urls import path

from jobs.node_api import logs, reports

urlpatterns = [
    path("attempts/<id:attempt_id>/report", reports.AttemptReportView.as_view(), name="node-attempt-report"),
    path("attempts/<id:attempt_id>/logs", logs.AttemptLogsView.as_view(), name="node-attempt-logs"),
]
