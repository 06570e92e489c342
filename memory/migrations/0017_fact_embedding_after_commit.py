"""A fact version is written without its vector, which the embedding stage (memory.vectors) adds after
commit (docs/adr/0017). Three things follow:

- the vector column is nullable, and the backlog (believed versions with no vector) has a small index;
- the one in-place UPDATE that is new, of the vector column, is the only one besides closing a belief
  (retracted_at, retracted_by, retraction_reason, superseded_by_id) and re-deriving scopes: a trigger
  refuses a change of any content column, and a vector that replaces another (a vector is written once);
- retrieval ranks facts by full text as well as by vector (memory.retrieval): each version's statement as
  a text-search vector, stored (`statement_text`, computed by the database from the statement, unknown to
  the ORM so no model read loads it: ranking a question's matches read it instead of parsing every matched
  statement again (docs/benchmarks.md, "Retrieval routes")), with a GIN index over the believed versions;
- the embedding task (memory.tasks.embed_facts), queued after each commit that wrote versions, also runs
  every five minutes (django-celery-beat, changeable in the admin): a queueing that failed loses nothing.

The dimension is the setting's, as in 0001 (checked at start against the column by unsay_site.checks).
CockroachDB: the same trigger (PL/pgSQL triggers, v24.3 and later) and an inverted index on the same
expression; neither is run by this project's tests, which use the embedded PostgreSQL.
"""

import pgvector.django.vector
from django.conf import settings
from django.db import migrations, models

from core.migration_ops import EngineSQL

CONTENT_COLUMNS = ("fact_key", "version", "kind", "subject", "lot", "statement", "attributes", "content_hash",
                   "source", "source_ref", "valid_from", "valid_to", "asserted_at", "asserted_by")
_OLD = ", ".join(f"OLD.{c}" for c in CONTENT_COLUMNS)
_NEW = ", ".join(f"NEW.{c}" for c in CONTENT_COLUMNS)
GUARD = f"""
CREATE OR REPLACE FUNCTION unsay_fact_content_is_never_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF ({_NEW}) IS DISTINCT FROM ({_OLD}) OR NEW.id <> OLD.id THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
            MESSAGE = 'a fact version''s content is never updated in place: write a new version';
    END IF;
    IF OLD.embedding IS NOT NULL AND NEW.embedding IS DISTINCT FROM OLD.embedding THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
            MESSAGE = 'a fact version''s vector is written once (it is derived from content that never changes)';
    END IF;
    RETURN NEW;
END
$$
"""
TRIGGER = ("CREATE TRIGGER fact_content_is_never_updated BEFORE UPDATE ON memory_fact "
           "FOR EACH ROW EXECUTE FUNCTION unsay_fact_content_is_never_updated()")
FULL_TEXT = {
    "postgresql": [
        "ALTER TABLE memory_fact ADD COLUMN IF NOT EXISTS statement_text tsvector "
        "GENERATED ALWAYS AS (to_tsvector('english', statement)) STORED",
        "CREATE INDEX IF NOT EXISTS fact_believed_text ON memory_fact USING gin (statement_text) "
        "WHERE retracted_at IS NULL",
    ],
    "cockroachdb": [
        "ALTER TABLE memory_fact ADD COLUMN IF NOT EXISTS statement_text TSVECTOR "
        "AS (to_tsvector('english', statement)) STORED",
        "CREATE INDEX IF NOT EXISTS fact_believed_text ON memory_fact USING GIN (statement_text) "
        "WHERE retracted_at IS NULL",
    ],
}
FORWARD = {
    "postgresql": [GUARD, TRIGGER, *FULL_TEXT["postgresql"]],
    "cockroachdb": [GUARD, TRIGGER, *FULL_TEXT["cockroachdb"]],
}
REVERSE = {
    "postgresql": [
        "DROP INDEX IF EXISTS fact_believed_text",
        "ALTER TABLE memory_fact DROP COLUMN IF EXISTS statement_text",
        "DROP TRIGGER IF EXISTS fact_content_is_never_updated ON memory_fact",
        "DROP FUNCTION IF EXISTS unsay_fact_content_is_never_updated()",
    ],
    "cockroachdb": [
        "DROP INDEX IF EXISTS memory_fact@fact_believed_text",
        "ALTER TABLE memory_fact DROP COLUMN IF EXISTS statement_text",
        "DROP TRIGGER IF EXISTS fact_content_is_never_updated ON memory_fact",
        "DROP FUNCTION IF EXISTS unsay_fact_content_is_never_updated",
    ],
}

SCHEDULE_NAME = "memory: embed fact versions without a vector"


def create_schedule(apps, schema_editor):
    interval, _ = apps.get_model("django_celery_beat", "IntervalSchedule").objects.get_or_create(
        every=5, period="minutes")
    apps.get_model("django_celery_beat", "PeriodicTask").objects.get_or_create(
        name=SCHEDULE_NAME,
        defaults={"task": "memory.tasks.embed_facts", "interval": interval, "enabled": True, "expire_seconds": 290,
                  "description": "Embeds believed fact versions that have no vector yet (the backlog)."})


def remove_schedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=SCHEDULE_NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0016_read_sets"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.AlterField(
            model_name="fact",
            name="embedding",
            field=pgvector.django.vector.VectorField(blank=True, dimensions=settings.UNSAY_EMBEDDING_DIM, null=True),
        ),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(condition=models.Q(("embedding__isnull", True), ("retracted_at__isnull", True)),
                               fields=["id"], name="fact_believed_unembedded"),
        ),
        EngineSQL(FORWARD, REVERSE),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
