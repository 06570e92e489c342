"""Package-first matching through the sweep: a patient told "safe" about a pack whose lot was typed
another way, or whose NDC is a repackager's, is re-decided when the recall of that lot arrives, and
the answer moves off "safe" with a correction drafted for them.

The recall is the real openFDA record D-0326-2019 (valsartan, Mylan NDC 00378-5814, lots 3069019-21),
built by the ingestion code (tests.factories); patients and their dispensing are synthetic."""

import pytest

from ask.services import ask
from corrections.models import Correction
from corrections.sweep.run import sweep
from drugs.matching import MatchClass
from memory.fact_writes import assert_claim
from memory.models import Decision
from patients.services import exposed_patients_for_recall
from tests.factories import make_patient, recall_claim

pytestmark = pytest.mark.django_db(transaction=True)

RECALL, LOT = "D-0326-2019", "3069020"


@pytest.mark.parametrize(("lot", "ndc", "expected"), [
    ("3069-020", "00378-5814-77", MatchClass.CONFIRMED),   # the same lot with a hyphen
    ("lot# 3069 020", "00378-5814-77", MatchClass.CONFIRMED),
    ("03069020", "00378-5814-77", MatchClass.PROBABLE),    # a leading zero: near miss
    ("3O69020", "", MatchClass.PROBABLE),                  # the letter O for a zero, no NDC
    ("3069020", "68071-9990-03", MatchClass.PROBABLE),     # another labeler's NDC (synthetic repackager)
])
def test_a_holder_told_safe_before_the_recall_is_corrected_after_it(hashing_embeddings, monkeypatch, lot, ndc,
                                                                    expected):
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)
    patient = make_patient("SYN-PF1", [("Valsartan 160 mg tablets", lot, ndc)], phone="")
    before = ask(patient, "Is my valsartan safe?")
    assert before.verdict == "safe"

    assert_claim(recall_claim(RECALL, LOT))  # the recall of that lot arrives
    exposures = exposed_patients_for_recall(RECALL)
    assert [(e.patient.external_ref, e.match_class) for e in exposures] == [("SYN-PF1", expected)]
    assert exposures[0].rule  # the pharmacist sees why
    sweep()

    before.refresh_from_db()
    now = Decision.objects.standing().filter(patient_id=patient.pk).get()
    assert before.status != "standing" and now.verdict in ("caution", "stop")
    draft = Correction.objects.get(patient=patient)
    assert draft.status == "draft" and draft.new_verdict == now.verdict


def test_the_same_lot_of_another_drug_is_no_exposure_and_the_answer_stands(hashing_embeddings, monkeypatch):
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)
    patient = make_patient("SYN-PF2", [("Escitalopram 10 mg tablets", "3069-020", "")], phone="")
    before = ask(patient, "Is my escitalopram safe?")
    assert before.verdict == "safe"
    assert_claim(recall_claim(RECALL, LOT))
    assert exposed_patients_for_recall(RECALL) == []  # a lot never matches on its own
    sweep()
    assert Decision.objects.standing().filter(patient_id=patient.pk).get().verdict == "safe"
    assert not Correction.objects.filter(patient=patient).exists()


def test_an_answer_about_another_drug_with_the_same_lot_does_not_stand_in_for_the_notice(hashing_embeddings,
                                                                                        monkeypatch):
    """Never neither: the escitalopram answer shares only the lot scope with the valsartan recall, so
    its re-decision says nothing about valsartan; the valsartan holder gets a notice."""
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)
    patient = make_patient("SYN-PF3", [("Escitalopram 10 mg tablets", LOT, ""),
                                       ("Valsartan 160 mg tablets", LOT, "00378-5814-77")], phone="")
    assert ask(patient, "Is my escitalopram safe?").verdict == "safe"
    fact = assert_claim(recall_claim(RECALL, LOT)).fact
    sweep(fact_ids=[fact.id])
    notice = Correction.objects.get(patient=patient)
    assert notice.kind == "notice" and notice.new_verdict in ("caution", "stop")
    assert Decision.objects.standing().filter(patient_id=patient.pk).get(subject="escitalopram").verdict == "safe"
