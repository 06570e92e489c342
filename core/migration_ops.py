"""Engine-specific SQL inside migrations: the statements are written in the migration itself, so a
migration means the same thing whenever it runs; nothing is read from files, settings or the
environment. Historical migrations depend on this module: change what it does only by adding.

The one input taken at migrate time is the database's own list of regions (SHOW REGIONS FROM
DATABASE), because a CockroachDB computed region column must name them; the database, not the
app's settings, is the truth of where a row can live (settings.UNSAY_REGIONS is checked against it
by `unsay_site.checks`)."""

from django.db import migrations

REGION_CASE = "{{ region_case }}"  # CASE region WHEN 'r' THEN 'r' ... END, over the database's regions
REGION_CASE_OR_PRIMARY = "{{ region_case_or_primary }}"  # the same, ELSE the primary region


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def region_case(regions, column: str = "region", *, otherwise: str | None = None) -> str:
    """`CASE region WHEN 'r1' THEN 'r1' ... END`: maps the app's plain region column to the database
    region of the same name; anything else is NULL, which the NOT NULL computed column refuses, so a
    row can never land in an unintended place - unless `otherwise` names a region for rows that name
    no patient (a decision asked for nobody)."""
    whens = " ".join(f"WHEN {_quote(r)} THEN {_quote(r)}" for r in regions)
    tail = f" ELSE {_quote(otherwise)}" if otherwise else ""
    return f"CASE {column} {whens}{tail} END"


def database_regions(connection) -> tuple[list[str], str | None]:
    """(regions in name order, primary region) of the current CockroachDB database; ([], None) when
    it has no regions (a single-region development cluster)."""
    with connection.cursor() as cursor:
        cursor.execute('SELECT region, "primary" FROM [SHOW REGIONS FROM DATABASE] ORDER BY region')
        rows = cursor.fetchall()
    return [r for r, _ in rows], next((r for r, primary in rows if primary), None)


def _needs_regions(statement: str) -> bool:
    # The crdb_internal_region type exists only once the database has regions.
    upper = statement.upper()
    return "LOCALITY" in upper or "CRDB_INTERNAL_REGION" in upper


def run_engine_sql(schema_editor, statements_by_vendor: dict[str, list[str]]) -> list[str]:
    """Execute the statements written for this connection's vendor (none for other engines) and
    return what was executed. On CockroachDB, region statements are filled in from the database's
    regions, and skipped when it has none."""
    connection = schema_editor.connection
    statements = statements_by_vendor.get(connection.vendor, [])
    regions = primary = None
    executed = []
    for statement in statements:
        if connection.vendor == "cockroachdb" and _needs_regions(statement):
            if regions is None:
                regions, primary = database_regions(connection)
            if not regions:
                continue
            statement = (statement.replace(REGION_CASE_OR_PRIMARY, region_case(regions, otherwise=primary))
                         .replace(REGION_CASE, region_case(regions)))
        schema_editor.execute(statement)
        executed.append(statement)
    return executed


def EngineSQL(forward: dict[str, list[str]], reverse: dict[str, list[str]]):  # noqa: N802  (an operation, like RunSQL)
    """A migration operation: `forward[vendor]` statements, undone by `reverse[vendor]`."""
    return migrations.RunPython(
        lambda apps, schema_editor: run_engine_sql(schema_editor, forward),
        lambda apps, schema_editor: run_engine_sql(schema_editor, reverse),
    )


def named_foreign_keys(references: list[tuple[str, str, str]]) -> tuple[list[str], list[str]]:
    """(add, drop) statements for foreign keys a model declares with db_constraint=False on every
    engine but which one engine keeps (CockroachDB: memory.models.HISTORY_REFERENCE).
    `references`: (table, column, referenced table), each constraint named
    `<table>_<column>_history_fk`, so the drop finds exactly what the add made."""
    add = [f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_history_fk FOREIGN KEY ({column}) "
           f"REFERENCES {target} (id)" for table, column, target in references]
    drop = [f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {table}_{column}_history_fk"
            for table, column, _ in references]
    return add, drop
