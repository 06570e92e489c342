"""A sweep run that ended well is 'succeeded', as an ingestion run is (core.runlock.RunStatus); rows
written as 'finished' are mapped, and mapped back on reversal."""

from django.db import migrations, models


def to_succeeded(apps, schema_editor):
    apps.get_model("corrections", "SweepRun").objects.filter(status="finished").update(status="succeeded")


def to_finished(apps, schema_editor):
    apps.get_model("corrections", "SweepRun").objects.filter(status="succeeded").update(status="finished")


class Migration(migrations.Migration):
    dependencies = [("corrections", "0014_audit_redacted")]

    operations = [
        migrations.AlterField(
            model_name="sweeprun",
            name="status",
            field=models.CharField(choices=[("running", "Running"), ("succeeded", "Succeeded"), ("failed", "Failed")],
                                   default="running", max_length=10),
        ),
        migrations.RunPython(to_succeeded, to_finished),
    ]
