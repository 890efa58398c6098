from rest_framework import serializers

from euler.api import StrictSerializer
from quotas.models import ApiKey


class ApiKeyCreateIn(StrictSerializer):
    label = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


class ApiKeyOut(serializers.ModelSerializer):
    prefix = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active")

    class Meta:
        model = ApiKey
        fields = ["id", "label", "prefix", "active", "created_at", "last_used_at", "revoked_at"]

    def get_prefix(self, obj) -> str:
        return f"euler_pk_{obj.prefix}"


class ApiKeyCreatedOut(ApiKeyOut):
    key = serializers.CharField(help_text="The secret. Shown once: store it now.")

    class Meta(ApiKeyOut.Meta):
        fields = [*ApiKeyOut.Meta.fields, "key"]


class UsageFigureOut(serializers.Serializer):
    limit = serializers.FloatField()
    used = serializers.FloatField(required=False)
    remaining = serializers.FloatField(required=False)


class ProjectOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    slug = serializers.CharField()
    created_at = serializers.DateTimeField()
    period = serializers.DictField()
    quota = serializers.DictField()
    usage = serializers.DictField(child=UsageFigureOut())
