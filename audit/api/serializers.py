from rest_framework import serializers

from audit.models import Action, AuditEvent


class AuditQueryIn(serializers.Serializer):
    action = serializers.CharField(
        required=False, max_length=64, help_text="one action (`job.cancelled`) or a family ending in a dot (`node.`)"
    )
    since = serializers.DateTimeField(required=False, help_text="ISO 8601; events at or after this instant")
    until = serializers.DateTimeField(required=False, help_text="ISO 8601; events before this instant")

    def validate_action(self, value: str) -> str:
        if value.endswith("."):
            if not any(a.startswith(value) for a in Action.values):
                raise serializers.ValidationError(f"No action starts with {value!r}.", code="invalid_action")
        elif value not in Action.values:
            raise serializers.ValidationError(f"Unknown action {value!r}.", code="invalid_action")
        return value

    def validate(self, attrs):
        if "since" in attrs and "until" in attrs and attrs["since"] >= attrs["until"]:
            raise serializers.ValidationError({"until": ["until must be after since."]}, code="invalid_range")
        return attrs


class AuditEventOut(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = ["id", "created_at", "action", "actor", "ip", "target", "details"]
        read_only_fields = fields
