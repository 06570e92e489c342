"""Grant the Pharmacist group the review permission, and schedule the periodic sweep and dispatch.

The beat rows live in django-celery-beat's tables so operators can change or disable them in the
admin; the sweep after each supersession is the fast path, these catch anything it missed.
"""

from django.db import migrations


PERIODIC = [
    # (name, task, every seconds, expires seconds: just under the period so runs never pile up)
    ("corrections: periodic sweep", "corrections.tasks.periodic_sweep", 900, 840),
    ("corrections: dispatch outbox", "corrections.tasks.dispatch_outbox", 60, 55),
]




def create_beat_tasks(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for name, task, every, expires in PERIODIC:
        schedule, _ = IntervalSchedule.objects.get_or_create(every=every, period="seconds")
        PeriodicTask.objects.get_or_create(
            name=name, defaults={"task": task, "interval": schedule, "expire_seconds": expires, "enabled": True}
        )


def remove_beat_tasks(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=[p[0] for p in PERIODIC]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("corrections", "0001_initial"),
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
        migrations.RunPython(create_beat_tasks, remove_beat_tasks),
    ]
