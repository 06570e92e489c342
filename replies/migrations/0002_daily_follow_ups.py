"""Schedule the daily no-reply follow-up (replies.tasks.reply_follow_ups) in django-celery-beat's tables,
so operators can change or disable it in the admin (Periodic tasks)."""

from django.db import migrations

NAME = "replies: follow up letters with no reply"


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    schedule, _ = IntervalSchedule.objects.get_or_create(every=1, period="days")
    PeriodicTask.objects.get_or_create(name=NAME, defaults={
        "task": "replies.tasks.reply_follow_ups", "interval": schedule, "expire_seconds": 82800, "enabled": True})


def remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("replies", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create, remove)]
