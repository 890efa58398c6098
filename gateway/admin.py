from django.contrib import admin

from gateway.models import Invocation


@admin.register(Invocation)
class InvocationAdmin(admin.ModelAdmin):
    list_display = ["created_at", "project", "agent", "instance", "method", "path", "status", "latency_ms", "error"]
    list_filter = ["status"]
    search_fields = ["agent__name", "path", "request_id"]
    list_select_related = ["project", "agent", "instance"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
