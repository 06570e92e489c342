"""Answers name the product as dispensed: a product the vocabulary does not know (a `product:` identity)
reads as its text, never as a blank, in the answer and in the "which medicine" question back. Real
recall records (tests/factories.py); patients are synthetic."""

import re

import pytest

from ask.services import decide, resolve_subject
from memory.fact_writes import assert_claim
from patients.models import DispensingRecord
from tests.factories import make_patient, recall_claims_of

pytestmark = pytest.mark.django_db(transaction=True)


def _no_blank(text: str) -> None:
    assert not re.search(r"\bthe\s{2,}|\s{2,}dispensed|other\s{2,}lots|\s{2,}lots", text), text


def test_product_key_answer_reads_as_the_product_and_has_no_blank(hashing_embeddings):
    # D-0735-2020: compounded HCG 10,000U/1ML INJ, lots 12162019@38 and 11272019@32; no openFDA block.
    for claim in recall_claims_of("D-0735-2020"):
        assert_claim(claim)
    patient = make_patient("SYN-HCG-R1", [("HCG 10,000U/1ML INJ 4 mL vial", "99999999")])
    key = DispensingRecord.objects.get(patient=patient).drug
    assert key.startswith("product:")

    outcome = decide(patient, "Is my medicine safe?")

    assert outcome.subject == key
    assert "HCG" in outcome.answer
    assert "product:" not in outcome.answer
    _no_blank(outcome.answer)


def test_which_medicine_list_reads_product_keys_as_products():
    patient = make_patient("SYN-HCG-R2", [("HCG 10,000U/1ML INJ 4 mL vial", "12162019@38"),
                                          ("Losartan potassium 50 mg tablets", "4L67C035")])

    subject, back = resolve_subject(patient, "hello there")

    assert subject is None
    assert "HCG" in back and "losartan" in back
    assert "product:" not in back


def test_brand_name_resolves_through_the_patients_own_package(hashing_embeddings):
    # D-1300-2020: NP Thyroid (subject "thyroid"), lot M331J18-1, NDC 42192-0331-01, Class I.
    for claim in recall_claims_of("D-1300-2020"):
        assert_claim(claim)
    patient = make_patient("SYN-NPT-R1", [("Liothyronine/levothyroxine 90mg", "M331J18-1", "42192-0331-01"),
                                          ("Losartan potassium 50 mg tablets", "4L67C035")])
    key = DispensingRecord.objects.get(patient=patient, drug_text__startswith="Lio").drug

    subject, back = resolve_subject(patient, "Is my NP Thyroid safe?")
    assert (subject, back) == (key, "")
    outcome = decide(patient, "Is my NP Thyroid safe?")
    assert outcome.verdict != "safe" and outcome.verdict != "unknown"
    assert "D-1300-2020" in outcome.answer


def test_product_named_by_its_own_words_among_several_drugs():
    patient = make_patient("SYN-HCG-R3", [("HCG 10,000U/1ML INJ 4 mL vial", "12162019@38"),
                                          ("Losartan potassium 50 mg tablets", "4L67C035")])
    key = DispensingRecord.objects.get(patient=patient, drug_text__startswith="HCG").drug

    assert resolve_subject(patient, "Is my HCG safe?") == (key, "")


def test_two_drugs_named_are_answered_one_decision_each(hashing_embeddings):
    from ask.services import ask_each, subjects_asked

    assert_claim(recall_claims_of("D-0502-2019")[0])
    patient = make_patient("SYN-TWO-R1", [("Losartan potassium 50 mg tablets", "4L67C035", "13668-0409-30"),
                                          ("Atorvastatin calcium 10 mg tablets", "SYN-A-1")])
    question = "Is my losartan and my atorvastatin safe?"

    assert sorted(subjects_asked(patient, question)) == ["atorvastatin", "losartan"]
    decisions = ask_each(patient, question)

    assert sorted(d.subject for d in decisions) == ["atorvastatin", "losartan"]
    assert all("atorvastatin+losartan" not in d.answer and "atorvastatin and losartan" not in d.answer
               for d in decisions)
    by_subject = {d.subject: d for d in decisions}
    assert by_subject["losartan"].verdict != "safe"
    assert by_subject["losartan"].pk != by_subject["atorvastatin"].pk
