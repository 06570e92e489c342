"""A record an ingest cannot use is kept once per record and source: ingesting the same file again (or
resuming it) does not add the same quarantine rows again, while the run still counts what it refused.

The records are real openFDA records from tests/fixtures/openfda/; the refused ones are copies of a real
record with one field broken, as the test says."""

import copy
import importlib
import io
import json
import zipfile
from functools import lru_cache

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection

from recalls.models import QuarantinedRecord
from recalls.services import ingest_document, ingest_file
from tests.paths import OPENFDA

pytestmark = pytest.mark.django_db(transaction=True)  # ingest commits each record on its own

BAD_DATE = "recall_initiation_date '2021-13-45' is not a YYYYMMDD date"


@lru_cache
def _records() -> tuple:
    with zipfile.ZipFile(OPENFDA / "drug-enforcement-2021-04-28.json.zip") as zf:
        return tuple(json.loads(zf.read(zf.namelist()[0]))["results"][:3])


def _file(path, records):
    path.write_text(json.dumps({"meta": {"results": {"total": len(records)}}, "results": list(records)}))
    return path


def _broken():
    """Two refused records: a real record with an impossible date, and a value that is not an object."""
    return [copy.deepcopy(_records()[0]) | {"recall_number": "X-1", "recall_initiation_date": "2021-13-45"},
            "just a string"]


def _ingest(path) -> str:
    out = io.StringIO()
    call_command("ingest_recalls", "--file", str(path), "--no-progress", stdout=out)
    return out.getvalue()


def test_ingesting_the_same_file_again_keeps_each_refused_record_once(hashing_embeddings, tmp_path):
    path = _file(tmp_path / "recalls.json", [*_records(), *_broken()])
    first_output = _ingest(path)
    first = list(QuarantinedRecord.objects.order_by("id").values("id", "run_id", "created", "last_seen"))
    again_output = _ingest(path)
    after = list(QuarantinedRecord.objects.order_by("id").values("id", "run_id", "created", "last_seen"))
    assert len(first) == 2 and [r["id"] for r in after] == [r["id"] for r in first]
    # The rows now name the run that met them last, and when; their first sighting is kept.
    assert len({r["run_id"] for r in after}) == 1 and after[0]["run_id"] != first[0]["run_id"]
    for now, before in zip(after, first, strict=True):
        assert now["created"] == before["created"] and now["last_seen"] > before["last_seen"]
    for output in (first_output, again_output):  # each run still reports what it refused, with the reasons
        assert "2 quarantined" in output and f"quarantined 1: {BAD_DATE}" in output
    assert QuarantinedRecord.objects.get(recall_number="X-1").source == str(path)


def test_the_same_record_in_another_file_or_a_changed_record_is_a_row_of_its_own(hashing_embeddings, tmp_path):
    _ingest(_file(tmp_path / "one.json", _broken()))
    _ingest(_file(tmp_path / "two.json", _broken()))
    changed = _broken()[0] | {"recall_initiation_date": "2021-14-45"}  # one character differs
    _ingest(_file(tmp_path / "one.json", [*_broken(), changed]))
    assert QuarantinedRecord.objects.count() == 5
    assert QuarantinedRecord.objects.filter(source=str(tmp_path / "one.json")).count() == 3


def test_a_record_refused_twice_in_one_file_by_concurrent_chunks_is_one_row(hashing_embeddings, tmp_path):
    bad = _broken()[0]
    records = [bad, *_records(), copy.deepcopy(bad), copy.deepcopy(bad)]
    run = ingest_document({"results": records}, source_ref=str(tmp_path / "twice.json"), chunk_size=1, workers=3)
    assert run.quarantined == 3 and run.fetched == 6
    assert QuarantinedRecord.objects.filter(recall_number="X-1").count() == 1


def test_the_migration_folds_copies_written_before_into_one_row(hashing_embeddings, tmp_path):
    path = _file(tmp_path / "recalls.json", _broken())
    first = ingest_file(path)
    second = ingest_file(path)
    assert QuarantinedRecord.objects.count() == 2
    constraint = next(c for c in QuarantinedRecord._meta.constraints
                      if c.name == "quarantine_once_per_record_and_source")
    migration = importlib.import_module("recalls.migrations.0008_quarantine_once_per_record_and_source")
    with connection.schema_editor() as editor:
        editor.remove_constraint(QuarantinedRecord, constraint)
    try:
        # As ingesting the file twice wrote them before: a copy per run, with no source or digest.
        QuarantinedRecord.objects.update(run=first, created=first.started)
        copies = []
        for row in QuarantinedRecord.objects.all():
            row.pk, row.run = None, second
            row.save()
            copies.append(row)
        QuarantinedRecord.objects.update(source="", record_digest="", last_seen=None)
        assert QuarantinedRecord.objects.count() == 4
        migration.fold_copies(apps, None)
    finally:
        with connection.schema_editor() as editor:
            editor.add_constraint(QuarantinedRecord, constraint)
    rows = {row.pk: row for row in QuarantinedRecord.objects.all()}
    assert set(rows) == {copy_row.pk for copy_row in copies}
    for copy_row in copies:
        row = rows[copy_row.pk]
        assert (row.run_id, row.source, row.created, row.last_seen) == (
            second.pk, str(path), first.started, copy_row.created)
