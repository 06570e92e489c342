"""On a database that is not migrated, every command of the product that uses the database stops before
doing anything and says what to run (core.commands.MigratedCommand), never with a traceback. A new
command must either be one or be listed here with the reason it is not."""

import importlib

from django.core.management import get_commands
from django.core.management.base import BaseCommand

from core.commands import MigratedCommand

NOT_MIGRATED_COMMANDS = {
    "demo": "migrates the database itself first",
    "status": "reports the database's state, migrated or not (tables not migrated yet are left out)",
    "export_openapi": "writes the API schema from code; no database",
    "export_embedding_model": "exports the local embedding model to files; no database",
    "make_demo_slice": "builds the demo slice from fixture files; no database",
    "measure_lots": "scores the lot parser on a labelled file; no database",
    "mcp": "the MCP server over stdio (api/): refuses an unknown key at start; not yet a MigratedCommand",
}
PRODUCT_APPS = ("core", "drugs", "memory", "recalls", "patients", "ask", "shelf", "corrections", "outbox",
                "worklist", "replies", "privacy", "api", "demo", "unsay_site")


def product_commands() -> dict[str, type[BaseCommand]]:
    return {name: importlib.import_module(f"{app}.management.commands.{name}").Command
            for name, app in get_commands().items() if app in PRODUCT_APPS}


def test_every_product_command_that_uses_the_database_checks_it_is_migrated():
    commands = product_commands()
    assert "ingest_recalls" in commands and "sweep" in commands
    unchecked = sorted(name for name, command in commands.items()
                       if not issubclass(command, MigratedCommand) and name not in NOT_MIGRATED_COMMANDS)
    assert not unchecked, f"make these core.commands.MigratedCommand (or list why not): {unchecked}"
    stale = sorted(set(NOT_MIGRATED_COMMANDS) - {n for n, c in commands.items() if not issubclass(c, MigratedCommand)})
    assert not stale, f"listed as not checking, but they do (or no longer exist): {stale}"
