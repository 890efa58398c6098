from django.contrib.auth.views import LogoutView
from django.urls import path

from console.views import activity, agents, auth, dashboard, jobs, keys, members, nodes, usage, workflows

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("login/", auth.LoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("project/switch/", auth.switch_project, name="switch-project"),
    path("join/<str:token>", auth.join, name="join"),
    path("join/<str:token>/", auth.join),
    path("keys/", keys.keys, name="keys"),
    path("keys/<id:key_id>/revoke/", keys.key_revoke, name="key-revoke"),
    path("members/", members.members_page, name="members"),
    path("members/invitations/<id:invitation_id>/revoke/", members.invitation_revoke, name="invitation-revoke"),
    path("members/<id:user_id>/role/", members.member_role, name="member-role"),
    path("members/<id:user_id>/remove/", members.member_remove, name="member-remove"),
    path("nodes/", nodes.nodes, name="nodes"),
    path("usage/", usage.usage, name="usage"),
    path("activity/", activity.activity, name="activity"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/new/", jobs.job_new, name="job-new"),
    path("jobs/<id:job_id>/", jobs.job_detail, name="job-detail"),
    path("jobs/<id:job_id>/cancel/", jobs.job_cancel, name="job-cancel"),
    path("jobs/<id:job_id>/retry/", jobs.job_retry, name="job-retry"),
    path("arrays/<id:array_id>/", jobs.array_detail, name="array-detail"),
    path("arrays/<id:array_id>/cancel/", jobs.array_cancel, name="array-cancel"),
    path("arrays/<id:array_id>/retry/", jobs.array_retry, name="array-retry"),
    path("schedules/", workflows.schedule_list, name="schedules"),
    path("schedules/<str:name>/", workflows.schedule_detail, name="schedule-detail"),
    path("schedules/<str:name>/switch/", workflows.schedule_switch, name="schedule-switch"),
    path("schedules/<str:name>/delete/", workflows.schedule_delete, name="schedule-delete"),
    path("webhooks/", workflows.webhook_list, name="webhooks"),
    path("webhooks/<id:hook_id>/", workflows.webhook_detail, name="webhook-detail"),
    path("webhooks/<id:hook_id>/delete/", workflows.webhook_delete, name="webhook-delete"),
    path(
        "webhooks/<id:hook_id>/deliveries/<id:delivery_id>/redeliver/",
        workflows.webhook_redeliver,
        name="webhook-redeliver",
    ),
    path("agents/", agents.agents, name="agents"),
    path("agents/<str:name>/", agents.agent_detail, name="agent-detail"),
]
