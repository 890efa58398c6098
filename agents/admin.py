from django.contrib import admin

from agents.models import Agent, AgentInstance


class InstanceInline(admin.TabularInline):
    model = AgentInstance
    extra = 0
    fields = ["base_url", "weight", "enabled", "health", "last_check_at", "last_error", "latency_ms"]
    readonly_fields = ["health", "last_check_at", "last_error", "latency_ms"]


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "health_path", "health_interval_s", "created_at"]
    list_filter = ["project"]
    search_fields = ["name", "project__name"]
    # The credential is write-only through the API; the admin never shows it.
    exclude = ["auth_header_value"]
    inlines = [InstanceInline]
