"""Schemas of the lending API (documentation: the views build their answers from lending.machines/terms)."""

from rest_framework import serializers


class WindowSchema(serializers.Serializer):
    days = serializers.ListField(child=serializers.CharField(), help_text="mon…sun, weekdays, weekends, daily")
    start = serializers.CharField(help_text="HH:MM, the lender's local time")
    end = serializers.CharField(help_text="HH:MM; not after start: the next day")


class TermsIn(serializers.Serializer):
    timezone = serializers.CharField(required=False, help_text="IANA name; default UTC")
    windows = WindowSchema(many=True, required=False, help_text="none: always available")
    max_cpu_milli = serializers.IntegerField(required=False, allow_null=True)
    max_memory_bytes = serializers.IntegerField(required=False, allow_null=True)
    max_gpus = serializers.IntegerField(required=False, allow_null=True)
    max_disk_bytes = serializers.IntegerField(required=False, allow_null=True)
    allowed_projects = serializers.ListField(child=serializers.CharField(), required=False)
    max_job_hours = serializers.FloatField(required=False, allow_null=True)


class TermsOut(serializers.Serializer):
    node = serializers.CharField()
    terms = TermsIn(allow_null=True)


class MachinesOut(serializers.Serializer):
    machines = serializers.ListField(child=serializers.DictField())
