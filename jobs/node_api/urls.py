from django.urls import path

from jobs.node_api import leaving, logs, reports
from nodeagent import protocol

urlpatterns = [
    path("attempts/<id:attempt_id>/report", reports.AttemptReportView.as_view(), name="node-attempt-report"),
    path("attempts/<id:attempt_id>/logs", logs.AttemptLogsView.as_view(), name="node-attempt-logs"),
    path(protocol.PATH_LEAVING, leaving.LeavingView.as_view(), name="node-leaving"),
]
