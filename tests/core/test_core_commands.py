"""A command run on a database that is not migrated says what to run and writes nothing, instead of a
traceback halfway through (core.commands)."""

import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from core import commands
from recalls.models import IngestRun
from tests.procs import PROJECT_DIR, scratch_database_name, subprocess_env


@pytest.fixture
def empty_database():
    with scratch_database_name("unmigrated") as name:
        yield name


@pytest.mark.django_db
@pytest.mark.parametrize("argv", [
    ["ingest_recalls", "--file", "demo/data/demo-slice.json", "--no-progress"],
    ["sweep", "--dry-run"],
    ["import_patients", "--by", "pharmacist", "tests/fixtures/does-not-matter.csv"],
])
def test_a_command_on_an_unmigrated_database_says_to_migrate_and_shows_no_traceback(empty_database, argv):
    env = subprocess_env(UNSAY_DB_NAME=empty_database)
    env.pop("DATABASE_URL", None)
    result = subprocess.run([sys.executable, "manage.py", *argv], cwd=PROJECT_DIR, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"The database '{empty_database}' is not migrated" in result.stderr
    assert "Run `.venv/bin/python manage.py migrate` first." in result.stderr, result.stderr


@pytest.mark.django_db
def test_a_migrated_database_passes_and_a_missing_migration_is_named(monkeypatch):
    assert commands.unapplied_migrations() == []
    commands.require_migrated()
    monkeypatch.setattr(commands, "unapplied_migrations",
                        lambda database: ["recalls.0008_quarantine_once_per_record_and_source"])
    with pytest.raises(CommandError, match=r"1 migration not applied: recalls\.0008_quarantine_once_per_record_and_"
                                           r"source\)\. Run `\.venv/bin/python manage\.py migrate` first\."):
        call_command("ingest_recalls", "--file", "demo/data/demo-slice.json", "--no-progress")
    assert not IngestRun.objects.exists()  # stopped before anything was written

