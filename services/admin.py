from django.contrib import admin

from services.models import Replica, Service, ServiceEvent


@admin.register(Service)
class ServiceAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "replicas", "min_replicas", "max_replicas", "revision", "stable_revision")
    search_fields = ("name",)
    readonly_fields = ("project", "agent", "revision", "stable_revision")


@admin.register(Replica)
class ReplicaAdmin(admin.ModelAdmin):
    list_display = ("id", "service", "revision", "state", "node_name", "job", "created_at")
    list_filter = ("state",)
    readonly_fields = ("service", "job", "instance", "attempt_id")


@admin.register(ServiceEvent)
class ServiceEventAdmin(admin.ModelAdmin):
    list_display = ("service", "kind", "message", "created_at")
