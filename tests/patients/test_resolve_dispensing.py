"""manage.py resolve_dispensing: rows stored before identity keys get them, through save_dispensing."""

from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import call_command

from patients.models import DispensingChange, DispensingRecord
from tests.factories import make_patient

pytestmark = pytest.mark.django_db(transaction=True)


def test_legacy_rows_are_re_resolved_with_an_audit_row_and_unchanged_rows_are_left_alone():
    patient = make_patient("SYN-R1", email="r1@example.com", phone="")
    when = datetime(2019, 6, 1, tzinfo=UTC)
    legacy = DispensingRecord.objects.create(patient=patient, drug="x", lot="A1818G", ndc="68788-0048-03",
                                             dispensed_at=when)
    current = DispensingRecord.objects.create(patient=patient, drug="Diovan", lot="3069020", dispensed_at=when)
    unknown = DispensingRecord.objects.create(patient=patient, drug="Vals 80 mg", lot="L1", dispensed_at=when)
    # As the first drug-identity version stored them: the old word-stripped name, no entered text, no product part.
    DispensingRecord.objects.filter(pk=legacy.pk).update(drug="losartan tab", drug_text="", drug_source="",
                                                         ndc_product="",
                                                         product_description="Losartan Potassium Tab. USP 50mg")
    before = DispensingChange.objects.count()

    out = StringIO()
    call_command("resolve_dispensing", "--dry-run", stdout=out)
    assert "3 dispensing rows: 1 would change" in out.getvalue()
    assert DispensingChange.objects.count() == before

    call_command("resolve_dispensing", stdout=out)
    legacy.refresh_from_db()
    assert (legacy.drug, legacy.drug_source, legacy.ndc_product) == ("losartan", "drug-ner", "68788-0048")
    assert DispensingChange.objects.count() == before + 1
    audit = DispensingChange.objects.latest("id")
    assert audit.dispensing_id == legacy.pk and audit.actor_label == "command:resolve_dispensing"
    assert audit.before["drug"] == "losartan tab" and audit.after["drug"] == "losartan"
    current.refresh_from_db()
    unknown.refresh_from_db()
    # A name the vocabulary does not know keeps its product text as identity (never blank).
    assert current.drug == "valsartan" and unknown.drug == "product:vals" and unknown.drug_source == "product-text"
    assert unknown.drug_text == "Vals 80 mg"


def test_an_unknown_lot_is_recorded_as_unknown():
    patient = make_patient("SYN-R2", email="r2@example.com", phone="")
    row = DispensingRecord(patient=patient, drug="Diovan 160 mg", lot="", lot_unknown=True,
                           dispensed_at=datetime(2019, 6, 1, tzinfo=UTC))
    row.full_clean()
    row.save()
    assert (row.lot, row.lot_unknown, row.drug) == ("", True, "valsartan")
    missing = DispensingRecord(patient=patient, drug="Diovan 160 mg", lot="", dispensed_at=row.dispensed_at)
    with pytest.raises(Exception, match="tick 'lot unknown'"):
        missing.full_clean()


def test_rows_read_by_an_older_lot_reader_are_read_anew_and_placeholders_become_unknown_lots():
    """After a new lot-field reader is deployed: a stored row whose field holds the lot with an expiry glued
    on gets the lot among its readings, and a row whose 'lot' says there is none is recorded as unknown
    (a candidate for the drug's recalls), each through save_dispensing with the text as it was audited."""
    patient = make_patient("SYN-R3", email="r3@example.com", phone="")
    when = datetime(2019, 6, 1, tzinfo=UTC)
    glued = DispensingRecord.objects.create(patient=patient, drug="Diovan 160 mg", lot="3069020/0521",
                                            dispensed_at=when)
    worded = DispensingRecord.objects.create(patient=patient, drug="Diovan 160 mg", lot="3069023:EXP 05/21",
                                             dispensed_at=when)
    placeholder = DispensingRecord.objects.create(patient=patient, drug="Diovan 160 mg", lot="3069021",
                                                  dispensed_at=when)
    clean = DispensingRecord.objects.create(patient=patient, drug="Diovan 160 mg", lot="3069022", dispensed_at=when)
    # As an older reader stored them: no other readings; a placeholder typed before it was refused.
    DispensingRecord.objects.filter(pk=glued.pk).update(lot="30690200521", lot_alternatives=[])
    DispensingRecord.objects.filter(pk=worded.pk).update(lot="3069023EXP", lot_alternatives=["3069023"])
    DispensingRecord.objects.filter(pk=placeholder.pk).update(lot="NOTRECORDED", lot_text="NOT RECORDED")
    before = DispensingChange.objects.count()

    out = StringIO()
    call_command("resolve_dispensing", "--dry-run", stdout=out)
    assert "4 dispensing rows: 3 would change" in out.getvalue()
    assert "lot field read anew 2, placeholder lot recorded as unknown 1" in out.getvalue()

    call_command("resolve_dispensing", stdout=out)
    glued.refresh_from_db()
    placeholder.refresh_from_db()
    clean.refresh_from_db()
    worded.refresh_from_db()
    assert "3069020" in glued.lot_alternatives
    assert (worded.lot, worded.lot_alternatives) == ("3069023", [])  # an expiry word after a colon: read cleanly
    assert (placeholder.lot, placeholder.lot_unknown) == ("", True)
    assert (clean.lot, clean.lot_alternatives) == ("3069022", [])
    assert DispensingChange.objects.count() == before + 3
    audit = DispensingChange.objects.get(dispensing_id=placeholder.pk, actor_label="command:resolve_dispensing")
    assert audit.before["lot"] == "NOTRECORDED" and str(audit.after["lot_unknown"]) == "True"
    out = StringIO()
    call_command("resolve_dispensing", "--dry-run", stdout=out)
    assert "4 dispensing rows: 0 would change" in out.getvalue()
