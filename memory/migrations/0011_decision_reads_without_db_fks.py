import django.db.models.deletion
from django.db import migrations, models

from core.migration_ops import EngineSQL

# Issue #14: the two foreign keys of memory_decisionread cost two row-by-row checks per read at COMMIT
# (about 24 per re-decision), the largest single server cost of a sweep. What they guarded:
# - a fact or decision deleted under its reads: PostgreSQL now refuses any DELETE of either (facts and
#   decisions are history; nothing deletes them, and TRUNCATE, which tests and benches use to empty a
#   whole database, fires no row trigger);
# - a read naming a row that does not exist: reads are written only with their decision, from fact rows
#   read in the same transaction (memory.decisions, corrections.sweep), and tests check for orphans.
# CockroachDB keeps both foreign keys: no trigger guard is verified there, and its FK checks are not
# the embedded engine's cost.
REFUSE_DELETE = """
CREATE OR REPLACE FUNCTION unsay_history_is_never_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
        MESSAGE = 'rows of ' || TG_TABLE_NAME || ' are history and are never deleted (decision reads point at them)';
END
$$
"""
FORWARD = {
    "postgresql": [
        REFUSE_DELETE,
        "CREATE TRIGGER fact_is_never_deleted BEFORE DELETE ON memory_fact "
        "FOR EACH ROW EXECUTE FUNCTION unsay_history_is_never_deleted()",
        "CREATE TRIGGER decision_is_never_deleted BEFORE DELETE ON memory_decision "
        "FOR EACH ROW EXECUTE FUNCTION unsay_history_is_never_deleted()",
    ],
    "cockroachdb": [
        "ALTER TABLE memory_decisionread ADD CONSTRAINT decisionread_decision_fk "
        "FOREIGN KEY (decision_id) REFERENCES memory_decision (id)",
        "ALTER TABLE memory_decisionread ADD CONSTRAINT decisionread_fact_fk "
        "FOREIGN KEY (fact_id) REFERENCES memory_fact (id)",
    ],
}
REVERSE = {
    "postgresql": [
        "DROP TRIGGER IF EXISTS decision_is_never_deleted ON memory_decision",
        "DROP TRIGGER IF EXISTS fact_is_never_deleted ON memory_fact",
        "DROP FUNCTION IF EXISTS unsay_history_is_never_deleted()",
    ],
    "cockroachdb": [
        "ALTER TABLE memory_decisionread DROP CONSTRAINT IF EXISTS decisionread_fact_fk",
        "ALTER TABLE memory_decisionread DROP CONSTRAINT IF EXISTS decisionread_decision_fk",
    ],
}


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0010_drop_redundant_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="decisionread",
            name="decision",
            field=models.ForeignKey(db_constraint=False, db_index=False,
                                    on_delete=django.db.models.deletion.CASCADE, related_name="reads",
                                    to="memory.decision"),
        ),
        migrations.AlterField(
            model_name="decisionread",
            name="fact",
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="reads", to="memory.fact"),
        ),
        EngineSQL(FORWARD, REVERSE),
    ]
