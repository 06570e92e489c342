"""A new recall reaches everyone it touches, on REAL openFDA data.

"Before" is the 2021-04-28 bulk file, "after" the 2023-08-05 part (tests/fixtures/openfda/):
recall numbers that appear only in 2023 are brand-new recalls. Synthetic patients (labelled so)
were dispensed a lot such a recall names; half of them asked before it existed and were told
"safe", half never asked. Ingesting the 2023 records must re-decide every asker (a correction
each) and draft a notice for every non-asker; the expected counts come from the raw records
(lot text present in code_info, classification), not from the code under test.
"""

from datetime import UTC, datetime

import pytest

from ask.services import ask, decide
from corrections.models import Correction
from corrections.sweep.run import count_stale, sweep
from drugs.lots import printed_lot
from memory.models import Decision, Fact
from patients.selectors import attach_patients
from recalls.ingest import parse_enforcement
from recalls.record_fields import Malformed
from recalls.services import ingest_document
from tests.factories import SNAPSHOT_2021, SNAPSHOT_2023, make_patient, read_results

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WANTED = 8  # new recalls with named lots, one asker and one never-asked patient on each
BEFORE_PER_DRUG = 25  # 2021 records of each chosen drug loaded as "before" (bounded test time)


def _choose(before, after):
    """Brand-new 2023 recalls that name lots, of drugs the 2021 file also recalled (so the 'before'
    world has facts on the drug), deterministic by recall number."""
    seen = {r["recall_number"] for r in before}
    chosen, subjects = [], set()
    for record in sorted(after, key=lambda r: r["recall_number"]):
        if record["recall_number"] in seen:
            continue
        try:
            parsed = parse_enforcement(record)
        except Malformed:
            continue
        if parsed.scope != "lot" or parsed.attributes["status"] in ("Terminated", "Completed"):
            continue
        lot = parsed.lots[0]
        raw = printed_lot(" ".join(filter(None, (record.get("code_info"), record.get("more_code_info")))))
        if printed_lot(lot) not in raw or parsed.subject in subjects:
            continue  # the lot must be there in the raw text; one recall per drug keeps patients apart
        chosen.append((record, parsed, lot))
        subjects.add(parsed.subject)
    return chosen, subjects


@pytest.fixture(scope="module")
def bulk():
    return read_results(SNAPSHOT_2021), read_results(SNAPSHOT_2023)


def _patient(ref, subject, lot):
    return make_patient(ref, [(subject, lot)], phone="", dispensed_at=datetime(2023, 1, 5, tzinfo=UTC))


def test_brand_new_recalls_correct_every_reassured_patient_and_notify_the_rest(bulk, hashing_embeddings,
                                                                               monkeypatch):
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)  # swept below, synchronously
    before, after = bulk
    chosen, subjects = _choose(before, after)
    per_drug: dict[str, int] = {}
    before_slice = []
    for record in before:
        subject = _subject_or_none(record)
        if subject in subjects and per_drug.get(subject, 0) < BEFORE_PER_DRUG:
            per_drug[subject] = per_drug.get(subject, 0) + 1
            before_slice.append(record)
    ingest_document({"results": before_slice})

    askers, never_asked, expected = [], [], {}
    for n, (record, parsed, lot) in enumerate(chosen):
        asker = _patient(f"SYN-NEW-A{n:02d}", parsed.subject, lot)
        if decide(asker, f"Is my {parsed.subject} safe?").verdict != "safe":
            asker.dispensings.all().delete()
            asker.delete()
            continue  # already under an older recall: not a reassured patient
        ask(asker, f"Is my {parsed.subject} safe?")
        askers.append(asker)
        never_asked.append(_patient(f"SYN-NEW-N{n:02d}", parsed.subject, lot))
        expected[asker.pk] = expected[never_asked[-1].pk] = (
            "stop" if record["classification"] == "Class I" else "caution")
        if len(askers) == WANTED:
            break
    assert len(askers) >= 6, "too few new recalls in the fixtures to make the point"
    assert count_stale() == 0

    after_slice = [record for record, parsed, lot in chosen if parsed.subject in
                   {p.dispensings.get().drug for p in askers}]
    ingest_document({"results": after_slice})
    new_ids = list(Fact.objects.filter(attributes__recall_number__in=[r["recall_number"] for r in after_slice])
                   .values_list("id", flat=True))
    assert count_stale(new_ids) == len(askers)

    report = sweep(fact_ids=new_ids)

    assert report.corrected == len(askers) and report.notices == len(never_asked)
    corrections = Correction.objects.filter(kind=Correction.Kind.CORRECTION)
    notices = Correction.objects.filter(kind=Correction.Kind.NOTICE)
    assert sorted(c.patient_id for c in corrections) == sorted(p.pk for p in askers)
    assert sorted(c.patient_id for c in notices) == sorted(p.pk for p in never_asked)
    for correction in [*corrections, *notices]:
        assert correction.new_verdict == expected[correction.patient_id]
        if correction.kind == Correction.Kind.CORRECTION:
            assert correction.old_verdict == "safe"
    assert_fresh_verdicts()
    # nothing twice
    again = sweep()
    assert (again.corrected, again.notices) == (0, 0)


def _subject_or_none(record):
    try:
        return parse_enforcement(record).subject
    except Malformed:
        return None


def assert_fresh_verdicts():
    """The invariant: every standing decision's verdict equals a fresh decision now."""
    for decision in attach_patients(Decision.objects.standing()):
        fresh = decide(decision.patient, decision.question, subject=decision.subject or None)
        assert fresh.verdict == decision.verdict, (decision.id, decision.verdict, fresh.verdict)
