# Merge of branches grace (0012_grace_stop) and ckpt (0012_ckpt_job_checkpoint): both add Job fields on 0011.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0012_ckpt_job_checkpoint"),
        ("jobs", "0012_grace_stop"),
    ]

    operations = []
