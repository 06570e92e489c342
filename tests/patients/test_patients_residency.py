"""Residency: the CockroachDB SQL the migrations run, and the report /health shows.

No CockroachDB here: the SQL is checked as executed for a fake cockroach connection whose database
has (or has not) regions, in order; the report is checked on PostgreSQL.
"""

import importlib
from datetime import UTC, datetime

import pytest

from core import health
from core.migration_ops import region_case, run_engine_sql
from patients.models import DispensingRecord, Patient
from patients.services import residency_report

PATIENTS_0002 = importlib.import_module("patients.migrations.0002_exposure_permission_residency")
CORRECTIONS_0003 = importlib.import_module("corrections.migrations.0003_region_for_residency")
MEMORY_0002 = importlib.import_module("memory.migrations.0002_fact_vector_index")


class FakeCursor:
    def __init__(self, regions):
        self.regions = regions

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, params=None):
        assert sql == 'SELECT region, "primary" FROM [SHOW REGIONS FROM DATABASE] ORDER BY region'

    def fetchall(self):  # SHOW REGIONS sorts by name; the primary is flagged
        return [(r, r == self.regions[0]) for r in sorted(self.regions)]


class FakeConnection:
    def __init__(self, regions, vendor="cockroachdb"):
        self.regions = regions
        self.vendor = vendor
        self.probes = 0

    def cursor(self):
        self.probes += 1
        return FakeCursor(self.regions)


class RecordingSchemaEditor:
    def __init__(self, regions=("us-east1", "us-west1", "europe-west1"), vendor="cockroachdb"):
        self.connection = FakeConnection(list(regions), vendor)
        self.executed = []

    def execute(self, sql):
        self.executed.append(sql)


def test_the_case_lists_exactly_the_given_regions():
    assert region_case(["us-east1", "europe-west1"]) == (
        "CASE region WHEN 'us-east1' THEN 'us-east1' WHEN 'europe-west1' THEN 'europe-west1' END")
    assert region_case(["o'brien"], otherwise="us-east1") == (
        "CASE region WHEN 'o''brien' THEN 'o''brien' ELSE 'us-east1' END")


def test_on_a_multi_region_cockroachdb_both_tables_become_regional_by_row_homed_by_region():
    editor = RecordingSchemaEditor()
    run_engine_sql(editor, PATIENTS_0002.FORWARD)
    # The database's regions, in SHOW REGIONS' (name) order, read once for the whole migration.
    case = "CASE region WHEN 'europe-west1' THEN 'europe-west1' WHEN 'us-east1' THEN 'us-east1' " \
           "WHEN 'us-west1' THEN 'us-west1' END"
    assert editor.executed == [
        f"ALTER TABLE patients_patient ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({case}) STORED",
        "ALTER TABLE patients_patient SET LOCALITY REGIONAL BY ROW AS home",
        f"ALTER TABLE patients_dispensingrecord ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL "
        f"AS ({case}) STORED",
        "ALTER TABLE patients_dispensingrecord SET LOCALITY REGIONAL BY ROW AS home",
    ]
    assert editor.connection.probes == 1
    reverse = RecordingSchemaEditor()
    run_engine_sql(reverse, PATIENTS_0002.REVERSE)
    assert reverse.executed[-1] == "ALTER TABLE patients_patient DROP COLUMN IF EXISTS home"
    assert len(reverse.executed) == 4


def test_a_cockroachdb_without_regions_skips_every_region_statement():
    editor = RecordingSchemaEditor(regions=())
    assert run_engine_sql(editor, PATIENTS_0002.FORWARD) == []
    # The fact table's vector index needs no regions; only its GLOBAL locality is skipped.
    editor = RecordingSchemaEditor(regions=())
    run_engine_sql(editor, MEMORY_0002.FORWARD)
    assert [s.split(" ON ")[0] for s in editor.executed] == [
        "ALTER TABLE memory_fact ADD COLUMN IF NOT EXISTS believed BOOL NOT NULL AS (retracted_at IS NULL) STORED",
        "CREATE VECTOR INDEX IF NOT EXISTS fact_believed_embedding_vec"]


def test_postgresql_runs_only_its_own_statements():
    editor = RecordingSchemaEditor(vendor="postgresql")
    assert run_engine_sql(editor, PATIENTS_0002.FORWARD) == []
    run_engine_sql(editor, MEMORY_0002.FORWARD)
    assert len(editor.executed) == 1 and "USING hnsw" in editor.executed[0]
    assert editor.connection.probes == 0


@pytest.mark.django_db
def test_the_report_counts_rows_per_region_on_postgresql():
    for i, region in enumerate(["aws-us-east-1", "aws-us-east-1", "aws-eu-west-1"]):
        patient = Patient.objects.create(external_ref=f"P-{i}", display_name="x", region=region)
        DispensingRecord.objects.create(patient=patient, drug="valsartan", lot="A1", quantity=1,
                                        dispensed_at=datetime(2019, 1, 1, tzinfo=UTC))
    report = residency_report()
    assert report["engine"] == "postgresql" and "one database in one place" in report["note"]
    assert report["tables"]["patients"]["rows_by_region"] == {"aws-eu-west-1": 1, "aws-us-east-1": 2}
    assert report["tables"]["dispensing_records"]["rows_by_region"] == {"aws-eu-west-1": 1, "aws-us-east-1": 2}


@pytest.mark.django_db
@pytest.mark.skipif(not hasattr(health, "register_section"), reason="health has no sections to register with")
def test_health_shows_the_residency_section():
    Patient.objects.create(external_ref="P-1", display_name="x", region="aws-ap-southeast-1")
    report = health.health_report()
    assert report["residency"]["tables"]["patients"]["rows_by_region"] == {"aws-ap-southeast-1": 1}


def test_cockroach_outputs_are_summarised_per_region():
    from patients.services import _leaseholder_regions, _locality

    create = [{"table_name": "patients_patient", "create_statement":
               "CREATE TABLE public.patients_patient (\n id INT8 NOT NULL DEFAULT unique_rowid(),\n ...\n)"
               " LOCALITY REGIONAL BY ROW AS home"}]
    assert _locality(create) == "LOCALITY REGIONAL BY ROW AS home"
    assert _locality([{"create_statement": "CREATE TABLE t (id INT8)"}]) == "REGIONAL BY TABLE (default)"
    ranges = [{"lease_holder_locality": "region=us-east1,zone=us-east1-b"},
              {"lease_holder_locality": "cloud=gce,region=europe-west1,zone=europe-west1-c"},
              {"lease_holder_locality": "region=us-east1,zone=us-east1-c"}, {"lease_holder_locality": None}]
    assert _leaseholder_regions(ranges) == {"us-east1": 2, "europe-west1": 1, "?": 1}


@pytest.mark.django_db
def test_a_refused_probe_is_reported_and_leaves_the_transaction_usable(monkeypatch):
    from django.db import connections

    Patient.objects.create(external_ref="P-1", display_name="x", region="aws-us-east-1")
    monkeypatch.setattr(connections["default"], "vendor", "cockroachdb")  # PostgreSQL will refuse SHOW CREATE TABLE
    report = residency_report()
    monkeypatch.undo()
    assert "error" in report["tables"]["patients"]["locality"]
    assert report["tables"]["patients"]["rows_by_region"] == {"aws-us-east-1": 1}
    assert Patient.objects.count() == 1  # the failed probe rolled back to its savepoint only


def test_decisions_drafts_and_messages_are_homed_with_their_patient_on_cockroachdb():
    editor = RecordingSchemaEditor(regions=("us-east1", "europe-west1"))
    run_engine_sql(editor, CORRECTIONS_0003.FORWARD)
    case = "CASE region WHEN 'europe-west1' THEN 'europe-west1' WHEN 'us-east1' THEN 'us-east1'"
    executed = "\n".join(editor.executed)
    # A decision asked for no patient (region '') goes to the primary region; drafts always name one.
    assert f"memory_decision ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({case} " \
           f"ELSE 'us-east1' END) STORED" in executed
    for table in ("corrections_correction", "corrections_outboxmessage"):
        assert f"{table} ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({case} END) STORED" in executed
        assert f"ALTER TABLE {table} SET LOCALITY REGIONAL BY ROW AS home" in executed
    assert "ALTER TABLE memory_decision SET LOCALITY REGIONAL BY ROW AS home" in executed
    assert "{{" not in executed
