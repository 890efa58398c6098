"""Django admin for operators: nodes with a bulk action per operation, tokens, events."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet

from euler.errors import EulerError
from nodes import gpuhealth, services
from nodes.liveness import live_last_seen
from nodes.models import EnrollmentToken, Node, NodeEvent, TrustLevel


def _bulk(modeladmin, request, queryset: QuerySet, verb: str, fn) -> None:
    done, failed = 0, []
    for node in queryset:
        try:
            fn(node)
            done += 1
        except EulerError as exc:
            failed.append(f"{node.name}: {exc.message}")
    if done:
        modeladmin.message_user(request, f"{verb}: {done} node(s).", messages.SUCCESS)
    for line in failed:
        modeladmin.message_user(request, line, messages.ERROR)


def _action(name: str, description: str, fn):
    def action(modeladmin, request, queryset):
        _bulk(modeladmin, request, queryset, description, lambda node: fn(node, request.user))

    action.__name__ = name
    action.short_description = description
    return action


def _approve_action(name: str, description: str, trust: str, public_pool: bool):
    """Approval of the selected nodes in one transaction (node_approve_many: a pool of thousands at once)."""

    def action(modeladmin, request, queryset):
        try:
            done = services.node_approve_many(
                nodes=list(queryset), by=request.user, trust=trust, public_pool=public_pool
            )
        except EulerError as exc:
            modeladmin.message_user(request, exc.message, messages.ERROR)
            return
        if done:
            modeladmin.message_user(request, f"{description}: {len(done)} node(s).", messages.SUCCESS)

    action.__name__ = name
    action.short_description = description
    return action


ACTIONS = [
    _approve_action("approve_platform", "Approve as platform", TrustLevel.PLATFORM, True),
    _approve_action("approve_community", "Approve as community (public pool)", TrustLevel.COMMUNITY, True),
    _approve_action("approve_untrusted", "Approve as untrusted (owner project only)", TrustLevel.UNTRUSTED, False),
    _action("reject", "Reject", lambda n, u: services.node_reject(node=n, by=u)),
    _action(
        "trust_platform",
        "Set trust: platform",
        lambda n, u: services.node_set_trust(node=n, trust=TrustLevel.PLATFORM, by=u),
    ),
    _action(
        "trust_community",
        "Set trust: community",
        lambda n, u: services.node_set_trust(node=n, trust=TrustLevel.COMMUNITY, by=u),
    ),
    _action(
        "trust_untrusted",
        "Set trust: untrusted",
        lambda n, u: services.node_set_trust(node=n, trust=TrustLevel.UNTRUSTED, by=u),
    ),
    _action(
        "admit_public_pool",
        "Admit to the public pool",
        lambda n, u: services.node_set_public_pool(node=n, public=True, by=u),
    ),
    _action(
        "remove_public_pool",
        "Remove from the public pool",
        lambda n, u: services.node_set_public_pool(node=n, public=False, by=u),
    ),
    _action("drain", "Drain (no new work)", lambda n, u: services.node_drain(node=n, by=u)),
    _action("undrain", "Undrain", lambda n, u: services.node_undrain(node=n, by=u)),
    _action(
        "approve_capacity",
        "Approve the pending capacity change",
        lambda n, u: services.node_capacity_approve(node=n, by=u),
    ),
    _action("revoke_credential", "Revoke credential", lambda n, u: services.node_revoke_credential(node=n, by=u)),
    _action(
        "reset_gpus",
        "Reset its unhealthy GPUs (they return once the agent no longer sees the fault)",
        lambda n, u: gpuhealth.node_gpu_reset(node=n, by=u),
    ),
]


class NodeEventInline(admin.TabularInline):
    model = NodeEvent
    extra = 0
    can_delete = False
    fields = ["created_at", "kind", "message", "by"]
    readonly_fields = fields
    ordering = ["-created_at"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "approval",
        "trust",
        "public_pool",
        "online",
        "draining",
        "region",
        "gpu_summary",
        "runtime_summary",
        "capacity_change",
        "job_egress",
        "reliability",
        "last_seen",
        "owner_project",
    ]
    list_filter = ["approval", "trust", "online", "draining", "public_pool", "region"]
    search_fields = ["name", "hostname", "region", "owner_project__name"]
    actions = ACTIONS
    inlines = [NodeEventInline]
    # Every state change goes through a bulk action (one service function each); fields are read-only.
    readonly_fields = [
        "name",
        "region",
        "labels",
        "hostname",
        "agent_version",
        "docker_version",
        "owner_project",
        "trust",
        "public_pool",
        "approval",
        "draining",
        "online",
        "last_seen",
        "last_heartbeat_at",
        "cpu_milli",
        "memory_bytes",
        "disk_bytes",
        "approved_cpu_milli",
        "approved_memory_bytes",
        "approved_disk_bytes",
        "pending_capacity",
        "gpus",
        "gpu_health",
        "gpu_resets",
        "gpu_fingerprint",
        "capped",
        "job_egress",
        "job_egress_error",
        "runtimes",
        "approved_runtimes",
        "lender_min_isolation",
        "allocated_cpu_milli",
        "allocated_memory_bytes",
        "allocated_disk_bytes",
        "allocated_gpus",
        "enrolled_at",
        "approved_at",
        "lender_terms",
        "reliability",
        "reliability_at",
    ]
    exclude = ["credential_lookup", "credential_digest"]

    def has_add_permission(self, request):
        return False

    def get_changelist(self, request, **kwargs):
        return LiveChangeList

    @admin.display(description="last seen", ordering="last_heartbeat_at")
    def last_seen(self, obj: Node):
        """The live time from Redis (the row's last_heartbeat_at trails it by a batch flush); a list page reads
        the times of all its rows at once (LiveChangeList), a node's page its own."""
        if not getattr(obj, "live_seen", False):
            live_last_seen([obj])
        return obj.last_heartbeat_at

    @admin.display(description="pending capacity")
    def capacity_change(self, obj: Node) -> str:
        """A report above the pinned capacity, waiting for the "Approve the pending capacity change" action."""
        pending = obj.pending_capacity or {}
        shown = {k: (runtime_names(v) if k == "runtimes" else v) for k, v in pending.items()}
        return ", ".join(f"{key} {value}" for key, value in sorted(shown.items())) or "—"

    @admin.display(description="runtimes")
    def runtime_summary(self, obj: Node) -> str:
        """The runtimes jobs may run under here (a sandbox marked), and the lender's minimum if any."""
        text = runtime_names(obj.runtimes) or "— (engine default)"
        return text + (f"; lender requires {obj.lender_min_isolation}" if obj.lender_min_isolation else "")

    @admin.display(description="GPU health")
    def gpu_health(self, obj: Node) -> str:
        """Why a GPU gets no jobs (the agent's XID or ECC finding), or that all are healthy."""
        sick = gpuhealth.unhealthy(obj)
        if not sick:
            return "all healthy" if obj.gpus else "—"
        return "; ".join(f"{gpuhealth.describe(g)}: {g.get('health_reason') or 'unhealthy'}" for g in sick)

    @admin.display(description="GPUs")
    def gpu_summary(self, obj: Node) -> str:
        if not obj.gpus:
            return "—"
        models = sorted({g.get("model") or "?" for g in obj.gpus})
        sick = gpuhealth.unhealthy(obj)
        return f"{len(obj.gpus)} × {', '.join(models)}" + (f" ({len(sick)} unhealthy)" if sick else "")


def runtime_names(runtimes) -> str:
    return ", ".join(f"{r.get('name')}{' (sandbox)' if r.get('sandbox') else ''}" for r in runtimes or [])


class LiveChangeList(ChangeList):
    """The node list with each row's live last-seen time, read from Redis in one round trip per page."""

    def get_results(self, request):
        super().get_results(request)
        self.result_list = live_last_seen(self.result_list)
        for node in self.result_list:
            node.live_seen = True


@admin.register(EnrollmentToken)
class EnrollmentTokenAdmin(admin.ModelAdmin):
    list_display = ["__str__", "label", "project", "trust", "region", "created_at", "expires_at", "used_at", "node"]
    list_filter = ["trust", "project"]
    fields = [
        "project",
        "label",
        "trust",
        "region",
        "labels",
        "created_by",
        "created_at",
        "expires_at",
        "used_at",
        "node",
    ]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False  # tokens are created by the API or `createenrollmenttoken` so that the secret is shown once


@admin.register(NodeEvent)
class NodeEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "node", "kind", "message", "by"]
    list_filter = ["kind"]
    search_fields = ["node__name", "message"]
    readonly_fields = ["node", "kind", "message", "data", "by", "created_at"]

    def has_add_permission(self, request):
        return False
