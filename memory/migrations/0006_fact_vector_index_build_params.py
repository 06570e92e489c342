from django.db import migrations

from core.migration_ops import EngineSQL

# Cheaper HNSW inserts: every new fact version is inserted into this index, and at
# pgvector's defaults (m 16, ef_construction 64) that insert was the bound on fact writes. m 12 and
# ef_construction 40 cost the least per insert of the variants measured (bench/hnsw_insert.py) with
# recall@8 0.994 vs 0.996 (m 8 / 32 fell to 0.991, too close to the 0.99 floor); queries keep
# hnsw.ef_search = 100 (settings.PGVECTOR_SESSION_OPTIONS). Same name, predicate and opclass.
# CockroachDB's vector index (C-SPANN, 0002) has no such parameters: nothing changes there.
FORWARD = {
    "postgresql": [
        "DROP INDEX IF EXISTS fact_believed_embedding_hnsw",
        "CREATE INDEX fact_believed_embedding_hnsw ON memory_fact USING hnsw (embedding vector_cosine_ops) "
        "WITH (m = 12, ef_construction = 40) WHERE retracted_at IS NULL",
    ],
}
REVERSE = {
    "postgresql": [
        "DROP INDEX IF EXISTS fact_believed_embedding_hnsw",
        "CREATE INDEX fact_believed_embedding_hnsw ON memory_fact USING hnsw (embedding vector_cosine_ops) "
        "WHERE retracted_at IS NULL",
    ],
}


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_apikey_pharmacist_scope")]
    operations = [EngineSQL(FORWARD, REVERSE)]
