"""Apply engine-specific SQL from sql/<vendor>/ inside migrations, with its reverse."""

from pathlib import Path

from django.db import migrations

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"


def _statements(path: Path) -> list[str]:
    text = "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]


def _multi_region(schema_editor) -> bool:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM [SHOW REGIONS FROM DATABASE]")
        return cursor.fetchone()[0] > 0


def _needs_multi_region(statement: str) -> bool:
    # The crdb_internal_region type exists only once the database has regions.
    upper = statement.upper()
    return "LOCALITY" in upper or "CRDB_INTERNAL_REGION" in upper


def _render(statement: str, params: dict) -> str:
    """Fill `{{ name }}` placeholders, for SQL that must follow settings (e.g. the region list)."""
    for key, value in params.items():
        statement = statement.replace("{{ " + key + " }}", value)
    return statement


def run_sql_file(name: str, schema_editor, *, reverse: bool = False, params=None):
    """params: a dict, or a callable returning one (evaluated when the migration runs)."""
    vendor = schema_editor.connection.vendor
    path = SQL_DIR / vendor / (name.replace(".sql", ".reverse.sql") if reverse else name)
    if not path.exists():
        return  # nothing engine-specific for this vendor
    values = (params() if callable(params) else params) or {}
    for statement in _statements(path):
        statement = _render(statement, values)
        # Locality statements need a multi-region database; a single-region dev cluster skips them.
        if _needs_multi_region(statement) and vendor == "cockroachdb" and not _multi_region(schema_editor):
            continue
        schema_editor.execute(statement)


def RunSQLFile(name: str, params=None):  # noqa: N802  (reads like the RunSQL operation it stands in for)
    return migrations.RunPython(
        lambda apps, schema_editor: run_sql_file(name, schema_editor, params=params),
        lambda apps, schema_editor: run_sql_file(name, schema_editor, reverse=True, params=params),
    )
