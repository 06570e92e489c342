"""Residency: the CockroachDB SQL rendered from settings, and the report /health shows.

No CockroachDB here: the SQL is checked as rendered for a fake multi-region cockroach connection
(what would be executed, in order); the report is checked on PostgreSQL.
"""

from datetime import UTC, datetime

import pytest
from django.test import override_settings

from core import health
from core.sqlfiles import run_sql_file
from patients.models import DispensingRecord, Patient
from patients.residency import region_case_sql, residency_sql_params
from patients.services import residency_report


class FakeCursor:
    def __init__(self, regions):
        self.regions = regions

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, params=None):
        assert sql == "SELECT count(*) FROM [SHOW REGIONS FROM DATABASE]"

    def fetchone(self):
        return (self.regions,)


class FakeConnection:
    vendor = "cockroachdb"

    def __init__(self, regions):
        self.regions = regions

    def cursor(self):
        return FakeCursor(self.regions)


class RecordingSchemaEditor:
    def __init__(self, regions=3):
        self.connection = FakeConnection(regions)
        self.executed = []

    def execute(self, sql):
        self.executed.append(sql)


def test_the_case_lists_exactly_the_configured_regions():
    assert region_case_sql() == (
        "CASE region WHEN 'aws-us-east-1' THEN 'aws-us-east-1' WHEN 'aws-eu-west-1' THEN 'aws-eu-west-1' "
        "WHEN 'aws-ap-southeast-1' THEN 'aws-ap-southeast-1' END")
    with override_settings(UNSAY_REGIONS=["us-east1", "europe-west1"]):
        assert residency_sql_params()["region_case"] == (
            "CASE region WHEN 'us-east1' THEN 'us-east1' WHEN 'europe-west1' THEN 'europe-west1' END")
    with override_settings(UNSAY_REGIONS=[]), pytest.raises(ValueError, match="UNSAY_REGIONS is empty"):
        region_case_sql()


def test_on_a_multi_region_cockroachdb_both_tables_become_regional_by_row_homed_by_region():
    editor = RecordingSchemaEditor(regions=3)
    with override_settings(UNSAY_REGIONS=["us-east1", "us-west1", "europe-west1"]):
        run_sql_file("020_patient_residency.sql", editor, params=residency_sql_params)
    case = "CASE region WHEN 'us-east1' THEN 'us-east1' WHEN 'us-west1' THEN 'us-west1' " \
           "WHEN 'europe-west1' THEN 'europe-west1' END"
    assert editor.executed == [
        f"ALTER TABLE patients_patient ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({case}) STORED",
        "ALTER TABLE patients_patient SET LOCALITY REGIONAL BY ROW AS home",
        f"ALTER TABLE patients_dispensingrecord ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL "
        f"AS ({case}) STORED",
        "ALTER TABLE patients_dispensingrecord SET LOCALITY REGIONAL BY ROW AS home",
    ]
    reverse = RecordingSchemaEditor(regions=3)
    run_sql_file("020_patient_residency.sql", reverse, reverse=True, params=residency_sql_params)
    assert reverse.executed[-1] == "ALTER TABLE patients_patient DROP COLUMN IF EXISTS home"
    assert len(reverse.executed) == 4


def test_a_cockroachdb_without_regions_skips_every_region_statement():
    editor = RecordingSchemaEditor(regions=0)
    run_sql_file("020_patient_residency.sql", editor, params=residency_sql_params)
    assert editor.executed == []


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
    editor = RecordingSchemaEditor(regions=3)
    with override_settings(UNSAY_REGIONS=["us-east1", "europe-west1"], UNSAY_PRIMARY_REGION="us-east1"):
        run_sql_file("030_patient_named_rows_residency.sql", editor, params=residency_sql_params)
    case = "CASE region WHEN 'us-east1' THEN 'us-east1' WHEN 'europe-west1' THEN 'europe-west1'"
    executed = "\n".join(editor.executed)
    # A decision asked for no patient (region '') goes to the primary region; drafts always name one.
    assert f"memory_decision ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({case} " \
           f"ELSE 'us-east1' END) STORED" in executed
    for table in ("corrections_correction", "corrections_outboxmessage"):
        assert f"{table} ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({case} END) STORED" in executed
        assert f"ALTER TABLE {table} SET LOCALITY REGIONAL BY ROW AS home" in executed
    assert "ALTER TABLE memory_decision SET LOCALITY REGIONAL BY ROW AS home" in executed
    assert not RecordingSchemaEditor(regions=0).executed
