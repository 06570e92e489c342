from django.db import migrations

from core.sqlfiles import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]
    operations = [RunSQLFile("010_fact_vector_index.sql")]
