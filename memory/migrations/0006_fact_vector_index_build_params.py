from django.db import migrations

from core.sqlfiles import RunSQLFile


class Migration(migrations.Migration):
    """PostgreSQL only: rebuild the believed-facts HNSW index with m 12 / ef_construction 40.
    CockroachDB's vector index (C-SPANN, sql/cockroachdb/010) has no such parameters; nothing changes there."""

    dependencies = [("memory", "0005_apikey_pharmacist_scope")]
    operations = [RunSQLFile("040_fact_vector_index_build_params.sql")]
