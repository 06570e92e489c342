"""Management commands that need the database as migrated: on a database that is not (a fresh one, or
one behind the code), they stop before doing anything and say what to run, never with a traceback.

    class Command(MigratedCommand): ...      instead of BaseCommand
    unapplied_migrations(database) -> [name]  "app.migration" not applied yet, in the order migrate applies them
    require_migrated(database)                raises CommandError naming the database and the command to run

The check is Django's own migration plan (what `migrate` would apply), made before `handle`: a half-run
ingest into tables that do not exist yet would stop with a database error halfway. A database that does
not answer is reported the same way, with its error. Commands that need no database (exporting the API
schema, measuring the lot parser) and those that migrate or report the state themselves (`demo`,
`status`) stay on BaseCommand; tests/house/test_migrated_commands.py holds every command to this.
"""

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

MIGRATE = ".venv/bin/python manage.py migrate"


def unapplied_migrations(database: str = DEFAULT_DB_ALIAS) -> list[str]:
    executor = MigrationExecutor(connections[database])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]


def require_migrated(database: str = DEFAULT_DB_ALIAS) -> None:
    name = connections[database].settings_dict["NAME"]
    try:
        missing = unapplied_migrations(database)
    except DatabaseError as exc:
        raise CommandError(f"The database {name!r} did not answer ({type(exc).__name__}: "
                           f"{str(exc).strip()}); check DATABASE_URL, or that it is running.") from None
    if not missing:
        return
    if len(missing) > 3:
        listed = f"{', '.join(missing[:3])} and {len(missing) - 3} more"
    else:
        listed = ", ".join(missing)
    raise CommandError(f"The database {name!r} is not migrated ({len(missing)} migration"
                       f"{'s' if len(missing) != 1 else ''} not applied: {listed}). Run `{MIGRATE}` first.")


class MigratedCommand(BaseCommand):
    """A BaseCommand that refuses to start on a database that is not migrated (require_migrated)."""

    requires_migrations_checks = True

    def check_migrations(self):
        require_migrated(DEFAULT_DB_ALIAS)
