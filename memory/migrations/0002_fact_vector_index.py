from django.db import migrations

from unsay_site.sqlfiles import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]
    operations = [RunSQLFile("010_fact_vector_index.sql")]
