from django.db import migrations

from core.migration_ops import EngineSQL

# PostgreSQL: HNSW over believed facts only. Queries filter `retracted_at IS NULL`, which matches this
# partial index; connections set hnsw.iterative_scan=strict_order so a filtered top-k still returns k.
# CockroachDB: a vector index is used only when every prefix column is pinned, so `believed` (a stored
# computed column) is the prefix and retrieval pins `believed = true`. Facts are read from every
# region: GLOBAL gives local reads everywhere (writes are slower, and rare).
FORWARD = {
    "postgresql": [
        "CREATE INDEX IF NOT EXISTS fact_believed_embedding_hnsw ON memory_fact "
        "USING hnsw (embedding vector_cosine_ops) WHERE retracted_at IS NULL",
    ],
    "cockroachdb": [
        "ALTER TABLE memory_fact ADD COLUMN IF NOT EXISTS believed BOOL NOT NULL AS (retracted_at IS NULL) STORED",
        "CREATE VECTOR INDEX IF NOT EXISTS fact_believed_embedding_vec ON memory_fact "
        "(believed, embedding vector_cosine_ops)",
        "ALTER TABLE memory_fact SET LOCALITY GLOBAL",
    ],
}
REVERSE = {
    "postgresql": ["DROP INDEX IF EXISTS fact_believed_embedding_hnsw"],
    "cockroachdb": [
        "ALTER TABLE memory_fact SET LOCALITY REGIONAL BY TABLE IN PRIMARY REGION",
        "DROP INDEX IF EXISTS memory_fact@fact_believed_embedding_vec",
        "ALTER TABLE memory_fact DROP COLUMN IF EXISTS believed",
    ],
}


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]
    operations = [EngineSQL(FORWARD, REVERSE)]
