"""PostgreSQL only: the believed-facts HNSW index over `embedding::halfvec(n)` instead of `embedding`
(issue #14, fact writes). Each new fact version is inserted into this index, and that insert was the
bound on fact writes; half-precision elements halve the index's size and the bytes each insert walks
and writes. Same name, same predicate, same m 12 / ef_construction 40; recall@8 against a
full-precision exact scan 0.993 (was 0.994), docs/benchmarks.md "Issue #14: fact writes, session 4".
memory.retrieval.semantic_neighbours orders by the same expression (the planner only uses an
expression index for that exact expression) and still reports the full-precision distance.

n is the column's own declared dimension, read from the catalog (the model's UNSAY_EMBEDDING_DIM when
0001 ran), so the cast matches the column whatever embedding provider the database was built for.
CockroachDB has no halfvec; its C-SPANN index (sql/cockroachdb/010) is left as it is.
"""

from django.db import migrations

FORWARD = (
    "DROP INDEX IF EXISTS fact_believed_embedding_hnsw",
    "CREATE INDEX fact_believed_embedding_hnsw"
    " ON memory_fact USING hnsw ((embedding::halfvec({dim})) halfvec_cosine_ops)"
    " WITH (m = 12, ef_construction = 40) WHERE retracted_at IS NULL",
)

# Back to memory 0006's index.
REVERSE = (
    "DROP INDEX IF EXISTS fact_believed_embedding_hnsw",
    "CREATE INDEX fact_believed_embedding_hnsw"
    " ON memory_fact USING hnsw (embedding vector_cosine_ops)"
    " WITH (m = 12, ef_construction = 40) WHERE retracted_at IS NULL",
)


def _run(statements, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        # pgvector stores a vector column's dimension as its type modifier.
        cursor.execute("SELECT atttypmod FROM pg_attribute"
                       " WHERE attrelid = 'memory_fact'::regclass AND attname = 'embedding'")
        dim = int(cursor.fetchone()[0])
    for statement in statements:
        schema_editor.execute(statement.format(dim=dim))


class Migration(migrations.Migration):
    dependencies = [("memory", "0009_decision_ask_permission")]
    operations = [
        migrations.RunPython(lambda apps, schema_editor: _run(FORWARD, schema_editor),
                             lambda apps, schema_editor: _run(REVERSE, schema_editor)),
    ]
