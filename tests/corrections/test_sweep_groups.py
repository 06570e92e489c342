"""Template groups of the set-based sweep (corrections.sweep.groups.PageDecider): decided once per sweep,
not once per page, and keyed on what a decision reads. Every outcome is checked against a fresh
ask.services.decide over the database (the invariant the sweep rests on: a standing decision's verdict
is what deciding now would give). Real openFDA recall facts (tests/factories.py), synthetic patients."""

from datetime import UTC, datetime

import pytest

from ask.beliefs import FactCache, PageBeliefs
from ask.services import decide, resolve_subject
from corrections.sweep.decider import SharedDecider
from corrections.sweep.groups import PageDecider, SweepGroups
from corrections.triggers import auto_sweep_suppressed
from memory.fact_writes import assert_claim
from patients.models import DispensingRecord, Patient
from tests.factories import recall_claim

pytestmark = pytest.mark.django_db(transaction=True)

DRUG = "Valsartan Tablets USP 40 mg"
RECALL, LOT = "D-0315-2019", "3061169"          # real: Class II, Mylan valsartan
NEW_RECALL, NEW_LOT = "D-0326-2019", "3069020"  # real; asserted between two pages
OTHERS = ["Losartan Potassium Tablets USP 50 mg", "Metformin Hydrochloride Tablets USP 500 mg",
          "Atorvastatin Calcium Tablets 20 mg"]
QUESTION = "Is my valsartan safe?"


def _patient(ref, lot, *others):
    patient = Patient.objects.create(region="aws-us-east-1", display_name=f"Synthetic {ref}", external_ref=ref,
                                     email=f"{ref.lower()}@example.com", preferred_channel="email", synthetic=True)
    for drug, row_lot in [(DRUG, lot), *((other, "OT0000001") for other in others)]:
        DispensingRecord.objects.create(patient=patient, drug=drug, lot=row_lot, synthetic=True,
                                        dispensed_at=datetime(2019, 1, 5, tzinfo=UTC))
    return patient


def _outcome(o):
    return (o.verdict, o.answer, o.subject, [(r.fact.id, r.score, r.match) for r in o.retrieved],
            sorted(o.load_bearing_ids), o.reasoner_verdict, o.guardrail_override, o.inputs_hash, o.patient_lots,
            o.premises, o.inputs)


def _page(people, *, groups=None, cache=None) -> PageDecider:
    """A sweep page's PageDecider over these patients, each asked QUESTION about valsartan; every
    outcome equal to a plain decide() over the database."""
    page = PageBeliefs({p.pk for p in people}, cache=cache)
    page.load_facts([(p.pk, resolve_subject(p, QUESTION, DRUG, beliefs=page)[0]) for p in people])
    decider = SharedDecider()
    decider.preload_from(page)
    grouped = PageDecider(decider, page, shared=groups)
    for patient in people:
        subject = decide(patient, QUESTION, subject=DRUG).subject
        mine, _shared, _group = grouped.decide(patient, QUESTION, subject)
        assert _outcome(mine) == _outcome(decide(patient, QUESTION, subject=subject)), patient.external_ref
    return grouped


def test_patients_holding_other_drugs_besides_decide_in_one_group(hashing_embeddings, monkeypatch):
    """The patient's other drugs resolve the subject and nothing else when the subject is dispensed:
    three patients with the same valsartan pack among different other medicines are one group."""
    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    with auto_sweep_suppressed():
        assert_claim(recall_claim(RECALL, LOT))
    people = [_patient("SYN-G1", LOT, OTHERS[0]), _patient("SYN-G2", LOT, OTHERS[1]),
              _patient("SYN-G3", LOT, OTHERS[1], OTHERS[2]), _patient("SYN-G4", LOT)]
    grouped = _page(people)
    assert (grouped.groups_decided, grouped.stamped) == (1, 3)


def test_a_later_page_reuses_a_group_only_over_the_same_believed_facts(hashing_embeddings, monkeypatch):
    """A group decided on one page is stamped on the next (no reasoner run) while the pages load the
    same fact versions; a recall asserted between pages makes the next page decide again, and every
    outcome still equals a fresh decision."""
    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    with auto_sweep_suppressed():
        assert_claim(recall_claim(RECALL, LOT))
    groups, cache = SweepGroups(), FactCache()
    first = _page([_patient("SYN-P1", LOT), _patient("SYN-P2", "BX0000001")], groups=groups, cache=cache)
    assert first.groups_decided == 2
    second = _page([_patient("SYN-P3", LOT), _patient("SYN-P4", "BX0000002")], groups=groups, cache=cache)
    assert (second.groups_decided, second.stamped, groups.reused) == (0, 2, 2)

    with auto_sweep_suppressed():  # a brand-new recall of the drug between two pages
        assert_claim(recall_claim(NEW_RECALL, NEW_LOT))
    third = _page([_patient("SYN-P5", LOT), _patient("SYN-P6", "BX0000003")], groups=groups, cache=cache)
    assert third.groups_decided == 2 and groups.reused == 2
