from django.utils import timezone
from rest_framework import serializers

from quotas.api.base import StrictSerializer
from quotas.models import ApiKey, Invitation, Role


class ApiKeyCreateIn(StrictSerializer):
    label = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    role = serializers.ChoiceField(
        choices=Role.choices, required=False, help_text="At most the caller's role; by default the caller's."
    )
    rpm_limit = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, required=False, allow_null=True, default=None
    )


class ApiKeyOut(serializers.ModelSerializer):
    prefix = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active")
    created_by = serializers.SerializerMethodField(help_text="Who made it; null for an operator's key.")

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "label",
            "prefix",
            "role",
            "created_by",
            "active",
            "created_at",
            "last_used_at",
            "revoked_at",
            "rpm_limit",
        ]

    def get_created_by(self, obj) -> str | None:
        return obj.created_by.get_username() if obj.created_by else None

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


class FairShareOut(serializers.Serializer):
    weight = serializers.FloatField(help_text="Fair-share weight (default 1): contended capacity splits by weight.")
    holds = serializers.FloatField(
        help_text="Fraction of the capacity the project may use that it holds now, on its dominant resource."
    )
    share = serializers.FloatField(help_text="holds / weight: the scheduler serves the lowest share first.")
    dominant_resource = serializers.CharField(allow_null=True)
    held = serializers.DictField(child=serializers.IntegerField())
    capacity = serializers.DictField(child=serializers.IntegerField())


class ProjectOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    slug = serializers.CharField()
    created_at = serializers.DateTimeField()
    period = serializers.DictField()
    quota = serializers.DictField()
    usage = serializers.DictField(child=UsageFigureOut())
    weight = serializers.FloatField()
    fair_share = FairShareOut()


class InvitationCreateIn(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices, required=False, default=Role.MEMBER)
    expires_in_days = serializers.IntegerField(
        min_value=1, max_value=90, required=False, default=7, help_text="Days until the link expires (default 7)."
    )


class InvitationOut(serializers.ModelSerializer):
    prefix = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField()
    created_by = serializers.SerializerMethodField()
    used_by = serializers.SerializerMethodField()

    class Meta:
        model = Invitation
        fields = [
            "id",
            "prefix",
            "role",
            "state",
            "created_at",
            "expires_at",
            "used_at",
            "revoked_at",
            "created_by",
            "used_by",
        ]

    def get_prefix(self, obj) -> str:
        return f"euler_inv_{obj.prefix}"

    def get_state(self, obj) -> str:
        return obj.state(timezone.now())

    def get_created_by(self, obj) -> str | None:
        return obj.created_by.get_username() if obj.created_by else None

    def get_used_by(self, obj) -> str | None:
        return obj.used_by.get_username() if obj.used_by else None


class InvitationCreatedOut(InvitationOut):
    token = serializers.CharField(help_text="The secret token. Shown once: share the link now.")
    url = serializers.CharField(help_text="The join link (contains the token).")

    class Meta(InvitationOut.Meta):
        fields = [*InvitationOut.Meta.fields, "token", "url"]


class MemberOut(serializers.Serializer):
    user_id = serializers.IntegerField(source="user.pk")
    username = serializers.CharField(source="user.username")
    role = serializers.CharField()
    joined_at = serializers.DateTimeField(source="created_at")


class MemberUpdateIn(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)
