"""Staff's read-only view of every project's audit trail."""

from django.contrib import admin

from audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "action", "actor", "ip", "project", "target"]
    list_filter = ["action", "project"]
    search_fields = ["actor", "target", "project__name"]
    date_hierarchy = "created_at"
    list_select_related = ["project"]
    fields = ["created_at", "action", "actor", "ip", "project", "target", "details"]
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
