"""Groups Pharmacist and Pharmacy staff with their permissions.

Permissions are created by a post_migrate signal, too late for a data migration, so we create them
here first. Later migrations that add models extend the groups the same way (see GROUP_PERMISSIONS).
"""

from django.db import migrations

from unsay_site.roles import grant_group_permissions




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
    operations = [migrations.RunPython(grant_group_permissions, backwards)]
