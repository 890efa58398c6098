from django.db import migrations, models


def roles_from_creators(apps, schema_editor):
    """Keys made before roles acted as owners: an operator's key (no creator) stays an owner key;
    a user's key gets its creator's role, as if it were made today."""
    ApiKey = apps.get_model("quotas", "ApiKey")
    Membership = apps.get_model("quotas", "Membership")
    ApiKey.objects.filter(created_by__isnull=True).update(role="owner")
    for key in ApiKey.objects.filter(created_by__isnull=False):
        membership = Membership.objects.filter(project_id=key.project_id, user_id=key.created_by_id).first()
        key.role = membership.role if membership else "member"
        key.save(update_fields=["role"])


class Migration(migrations.Migration):
    dependencies = [("quotas", "0003_fair_project_weight")]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="role",
            field=models.CharField(choices=[("owner", "Owner"), ("member", "Member")], default="member", max_length=10),
        ),
        migrations.RunPython(roles_from_creators, migrations.RunPython.noop),
    ]
