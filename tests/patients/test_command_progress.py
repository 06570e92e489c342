"""The long commands' progress bars count units of work that committed: the last state drawn equals the
rows (or events) committed, 100% appears only with it, and --no-progress draws nothing."""

import re
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from patients.management.commands import resolve_dispensing
from patients.models import DispensingRecord
from shelf.models import ReceivedEvent
from tests import epcis_docs as d
from tests.factories import make_patient
from tests.patients.test_patients_import import GOOD_ROWS, HEADER

STATE = re.compile(r"(\d+)%\|[^|]*\| (\d+)/(\d+) \[([^\]]*)\]")


def bar_states(stderr: str, desc: str) -> list[tuple[int, int, int, str]]:
    """(percent, done, total, [elapsed<left, rate]) of every state the bar was drawn in, in order."""
    return [(int(p), int(n), int(t), timing) for segment in re.split(r"[\r\n]", stderr) if desc in segment
            for p, n, t, timing in STATE.findall(segment)]


def legacy_rows(n: int) -> None:
    """n rows stored before identity keys: each one changes when re-resolved."""
    patient = make_patient("SYN-P1", email="p1@example.com", phone="")
    for i in range(n):
        row = DispensingRecord.objects.create(patient=patient, drug="Diovan", lot=f"L{i}",
                                              dispensed_at=datetime(2019, 6, 1 + i, tzinfo=UTC))
        DispensingRecord.objects.filter(pk=row.pk).update(drug="x", drug_text="", drug_source="", ndc_product="")


@pytest.mark.django_db(transaction=True)
def test_resolve_dispensing_counts_rows_as_their_batch_commits(capsys):
    legacy_rows(7)
    call_command("resolve_dispensing", "--batch", "3")
    states = bar_states(capsys.readouterr().err, "resolve_dispensing")
    assert states[-1][:3] == (100, 7, 7), states
    assert {n for _p, n, _t, _timing in states} <= {0, 3, 6, 7}, states  # whole batches, never ahead
    assert all(p < 100 for p, n, _t, _timing in states if n < 7), states
    assert re.search(r"row/s|s/row", states[-1][3]), states  # a rate


@pytest.mark.django_db(transaction=True)
def test_resolve_dispensing_never_reads_100_percent_when_a_batch_failed(capsys, monkeypatch):
    legacy_rows(7)
    real_save, saved = resolve_dispensing.Command._save, []

    def save_then_fail(rows):
        if saved:
            raise RuntimeError("the database went away")
        saved.append(len(rows))
        real_save(rows)

    monkeypatch.setattr(resolve_dispensing.Command, "_save", staticmethod(save_then_fail))
    with pytest.raises(RuntimeError):
        call_command("resolve_dispensing", "--batch", "3")
    states = bar_states(capsys.readouterr().err, "resolve_dispensing")
    assert max(n for _p, n, _t, _timing in states) == 3 == DispensingRecord.objects.exclude(drug="x").count()
    assert all(p < 100 for p, *_rest in states), states


@pytest.mark.django_db(transaction=True)
def test_resolve_dispensing_dry_run_and_no_progress(capsys):
    legacy_rows(2)
    call_command("resolve_dispensing", "--dry-run")
    assert bar_states(capsys.readouterr().err, "resolve_dispensing (dry run)")[-1][:3] == (100, 2, 2)
    call_command("resolve_dispensing", "--no-progress")
    assert "resolve_dispensing" not in capsys.readouterr().err


@pytest.fixture
def patients(db):
    return [make_patient(ref, region=region, name=ref, email=f"{ref}@example.com", phone="")
            for ref, region in [("P-1", "aws-us-east-1"), ("P-2", "aws-eu-west-1")]]


def test_import_dispensing_reaches_the_rows_imported_only_once_committed(patients, tmp_path, capsys):
    good = tmp_path / "good.csv"
    good.write_text(HEADER + "".join(GOOD_ROWS))
    call_command("import_dispensing", str(good))
    states = bar_states(capsys.readouterr().err, "import_dispensing")
    assert states[0][:3] == (0, 0, 3) and states[-1][:3] == (100, 3, 3) == (100, DispensingRecord.objects.count(), 3)
    assert all(p < 100 for p, n, _t, _timing in states if n < 3), states


def test_import_dispensing_of_a_refused_file_stays_at_zero(patients, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + GOOD_ROWS[0] + "P-9,valsartan,,,A1,,1,2019-01-01,\n")
    with pytest.raises(CommandError):
        call_command("import_dispensing", str(bad))
    states = bar_states(capsys.readouterr().err, "import_dispensing")
    assert states and all(n == 0 and p == 0 for p, n, _t, _timing in states), states
    assert not DispensingRecord.objects.exists()


def test_import_dispensing_no_progress(patients, tmp_path, capsys):
    good = tmp_path / "good.csv"
    good.write_text(HEADER + "".join(GOOD_ROWS))
    call_command("import_dispensing", str(good), "--no-progress")
    assert "import_dispensing" not in capsys.readouterr().err


def test_receive_epcis_reaches_the_events_settled_only_once_committed(db, tmp_path, capsys):
    path = tmp_path / "shipment.xml"
    path.write_bytes(d.shipment_xml(d.serials("J", 4)))
    call_command("receive_epcis", str(path), "--site", "Main St")
    states = bar_states(capsys.readouterr().err, "receive_epcis")
    assert states[0][:3] == (0, 0, 3) and states[-1][:3] == (100, 3, 3), states
    assert ReceivedEvent.objects.count() == 3
    call_command("receive_epcis", str(path), "--site", "Main St", "--no-progress")
    assert "receive_epcis" not in capsys.readouterr().err


def test_receive_epcis_of_a_refused_document_never_reads_100_percent(db, tmp_path, capsys):
    path = tmp_path / "shipment.xml"
    path.write_bytes(d.shipment_xml(d.serials("J", 4)))
    with pytest.raises(CommandError):
        call_command("receive_epcis", str(path), "--site", "")
    states = bar_states(capsys.readouterr().err, "receive_epcis")
    assert states and all(n == 0 for _p, n, _t, _timing in states), states
    assert not ReceivedEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_ingest_recalls_with_workers_counts_records_as_their_chunks_finish(tmp_path):
    import io
    import json
    from itertools import combinations

    from recalls.documents import load_document
    from recalls.models import IngestRun
    from recalls.services import CHUNK

    part = load_document("tests/fixtures/openfda/drug-enforcement-2023-08-05-part.json.zip")
    records = part["results"][: 2 * CHUNK + 50]
    path = tmp_path / "recalls.json"
    path.write_text(json.dumps({"meta": part.get("meta", {}), "results": records}))
    err = io.StringIO()
    call_command("ingest_recalls", "--file", str(path), "--workers", "3", stdout=io.StringIO(), stderr=err)

    states = bar_states(err.getvalue(), "ingest")
    total = len(records)
    sizes = [CHUNK, CHUNK, 50]
    finished_chunks = {sum(c) for r in range(len(sizes) + 1) for c in combinations(sizes, r)}
    assert {n for _p, n, _t, _timing in states} <= finished_chunks, states  # whole chunks, in any order
    assert states[-1][:3] == (100, total, total) and IngestRun.objects.get().fetched == total, states
    assert all(p < 100 for p, n, _t, _timing in states if n < total), states
