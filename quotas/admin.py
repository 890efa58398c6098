from django.contrib import admin

from quotas.models import ApiKey, Invitation, Membership, Project, Quota, UsageEntry


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class QuotaInline(admin.StackedInline):
    model = Quota
    can_delete = False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "weight", "created_at"]
    search_fields = ["name", "slug"]
    inlines = [QuotaInline, MembershipInline]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["label", "project", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["project"]
    search_fields = ["label", "prefix", "project__name"]
    # The hash is never shown; keys are created through the console, the API or createapikey.
    fields = ["project", "label", "prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["project", "cpu_core_seconds", "gpu_seconds", "invocations", "max_concurrent_jobs", "max_api_keys"]
    search_fields = ["project__name"]


@admin.register(UsageEntry)
class UsageEntryAdmin(admin.ModelAdmin):
    list_display = ["project", "day", "resource", "agent_name", "amount"]
    list_filter = ["resource", "day"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["prefix", "project", "role", "created_at", "expires_at", "used_at", "revoked_at"]
    list_filter = ["project", "role"]
    # The token hash is never shown; links are created through the console or the API.
    fields = ["project", "role", "prefix", "created_by", "created_at", "expires_at", "used_at", "used_by", "revoked_at"]
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False
