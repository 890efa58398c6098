"""The ledger in the admin: read-only (entries are written once, by the ending of an attempt)."""

from django.contrib import admin

from lending.models import LedgerEntry


@admin.register(LedgerEntry)
class LedgerEntryAdmin(admin.ModelAdmin):
    list_display = ["ended_at", "node_name", "lender_name", "project_name", "outcome", "reason", "credited", "run_ms"]
    list_filter = ["outcome", "credited", "gpu_fault"]
    search_fields = ["node_name", "lender_name", "project_name"]
    date_hierarchy = "day"

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
