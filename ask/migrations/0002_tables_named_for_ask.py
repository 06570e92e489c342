"""The API clients, keys, client-patient links and usage counters keep their rows and take this
app's table names (memory_apiclient -> ask_apiclient, ...). A rename in place, on PostgreSQL and
CockroachDB alike; code reaches the tables through _meta.db_table."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('ask', '0001_initial'),
    ]

    operations = [
        migrations.AlterModelTable(
            name='apiclient',
            table=None,
        ),
        migrations.AlterModelTable(
            name='apikey',
            table=None,
        ),
        migrations.AlterModelTable(
            name='clientpatient',
            table=None,
        ),
        migrations.AlterModelTable(
            name='usagecounter',
            table=None,
        ),
    ]
