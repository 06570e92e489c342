"""Let pharmacists and pharmacy staff see ingest runs, and schedule the weekly openFDA ingest.

The schedule is a django-celery-beat PeriodicTask + CrontabSchedule so operators can change the
day/time or disable it in the admin. Each run is incremental from the last successful one.
"""

from django.db import migrations


TASK_NAME = "recalls: weekly openFDA ingest"




def create_schedule(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    # Mondays 06:15 UTC: openFDA publishes enforcement reports weekly.
    schedule, _ = CrontabSchedule.objects.get_or_create(
        minute="15", hour="6", day_of_week="1", day_of_month="*", month_of_year="*", timezone="UTC")
    PeriodicTask.objects.get_or_create(
        name=TASK_NAME,
        defaults={"task": "recalls.tasks.ingest_openfda", "crontab": schedule, "enabled": True,
                  "expire_seconds": 6 * 24 * 3600,
                  "description": "Incremental openFDA drug enforcement ingest from the last successful run."},
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=TASK_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("recalls", "0001_initial"),
        ("unsay_site", "0002_groups"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [
        # Frozen: groups are synced from core.roles by a post_migrate receiver
        # (unsay_site.apps), as django.contrib.auth creates permissions; this step used to replay
        # today's table from a historical migration.
        migrations.RunPython(migrations.RunPython.noop, migrations.RunPython.noop),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
