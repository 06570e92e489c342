"""Groups Pharmacist and Pharmacy staff with their permissions: now created and kept in step with
core.roles.GROUP_PERMISSIONS by a post_migrate receiver (unsay_site.apps), after Django has
created every app's permissions. This migration no longer imports live code; it keeps its place in
the graph and its backwards step."""

from django.db import migrations





def backwards(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["Pharmacist", "Pharmacy staff"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("unsay_site", "0001_initial"),
        ("patients", "0001_initial"),
        ("memory", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [# Frozen: groups are synced from core.roles by a post_migrate receiver
        # (unsay_site.apps), as django.contrib.auth creates permissions; this step used to replay
        # today's table from a historical migration.
        migrations.RunPython(migrations.RunPython.noop, backwards)]
