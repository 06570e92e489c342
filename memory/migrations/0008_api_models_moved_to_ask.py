"""The ask app owns ApiClient, ClientPatient, ApiKey and UsageCounter now (ask 0001): state only, nothing is dropped."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('ask', '0001_initial'),
        ('memory', '0007_read_bearing_fact_decision'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveField(
                model_name='apikey',
                name='client',
            ),
            migrations.RemoveField(
                model_name='clientpatient',
                name='client',
            ),
            migrations.RemoveField(
                model_name='apikey',
                name='patient',
            ),
            migrations.RemoveField(
                model_name='clientpatient',
                name='patient',
            ),
            migrations.DeleteModel(
                name='UsageCounter',
            ),
            migrations.DeleteModel(
                name='ApiClient',
            ),
            migrations.DeleteModel(
                name='ApiKey',
            ),
            migrations.DeleteModel(
                name='ClientPatient',
            ),
        ], database_operations=[]),
    ]
