from django.contrib import admin

import audit
from quotas.models import ApiKey, Invitation, Membership, PriorityClass, Project, Quota, UsageEntry


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class QuotaInline(admin.StackedInline):
    model = Quota
    can_delete = False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "weight", "default_priority_class", "max_priority_class", "created_at"]
    search_fields = ["name", "slug"]
    inlines = [QuotaInline, MembershipInline]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        # The fair-share weight and the priority classes are part of the project's quota.
        changed = [f for f in ("weight", "default_priority_class", "max_priority_class") if f in form.changed_data]
        if change and changed:
            audit.record(
                "quota.changed",
                project=obj.pk,
                target=f"project:{obj}",
                details={f: str(getattr(obj, f)) if f != "weight" else obj.weight for f in changed},
                by=request.user,
            )

    def save_formset(self, request, form, formset, change):
        super().save_formset(request, form, formset, change)
        if formset.model is Quota:
            for quota_form in formset.forms:
                if change and quota_form.has_changed() and quota_form.instance.pk:
                    _quota_changed(quota_form, request)


@admin.register(PriorityClass)
class PriorityClassAdmin(admin.ModelAdmin):
    """Classes place strictly by value (highest first) and a higher one may preempt lower ones; a job keeps the
    name and value it was submitted with, so a changed value counts for new jobs only."""

    list_display = ["name", "value", "description", "created_at"]
    search_fields = ["name"]


def _quota_changed(form, request) -> None:
    quota = form.instance
    changes = {name: form.cleaned_data.get(name) for name in form.changed_data}
    audit.record(
        "quota.changed", project=quota.project_id, target=f"project:{quota.project}", details=changes, by=request.user
    )


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["label", "project", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["project"]
    search_fields = ["label", "prefix", "project__name"]
    # The hash is never shown; keys are created through the console, the API or createapikey.
    fields = ["project", "label", "prefix", "created_by", "created_at", "last_used_at", "revoked_at", "rpm_limit"]
    readonly_fields = fields[:-1]  # the operator may set a key's gateway calls per minute

    def has_add_permission(self, request):
        return False


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["project", "cpu_core_seconds", "gpu_seconds", "invocations", "max_concurrent_jobs", "max_api_keys"]
    search_fields = ["project__name"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change and form.changed_data:
            _quota_changed(form, request)


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
