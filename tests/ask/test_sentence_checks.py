"""tests/sentences.py's sentence_problems flags what testers found untrue (the sentences quoted as the
product once wrote them) and passes what the rules and letters write now. Real recall records; synthetic
patients."""

from datetime import UTC, date, datetime
from types import SimpleNamespace

import pytest

from ask.services import decide
from corrections import drafting
from drugs.matching import dispensed, explain
from memory.fact_writes import assert_claim
from tests.factories import make_patient, recall_claim
from tests.sentences import sentence_problems

pytestmark = pytest.mark.django_db(transaction=True)


def _reader(*rows, language="en"):
    return SimpleNamespace(rows=list(rows), preferred_language=language)


def test_a_class_i_recall_of_every_lot_confirmed_by_ndc(hashing_embeddings):
    fact = assert_claim(recall_claim("D-0219-2017", None)).fact  # Class I docusate, every lot, NDC 62295-0601
    row = dispensed(drug="docusate", ndc="62295-0601-01", lot="ZZ1", dispensed_at=date(2016, 12, 1))
    found = explain(fact, row)
    assert str(found.klass) == "product_all_lots"
    then = ("Class I recall D-0219-2017 (Terminated) of Docusate Oral 10 mg/mL Oral Syringe, all lots. This recall "
            "covers every lot of this docusate product, including yours. Ask your pharmacist before changing how "
            "you take it; they can arrange a replacement from an unaffected lot.")
    flagged = sentence_problems(then, verdict="caution", found=found, fact=fact, patient=_reader(row))
    assert "a confirmed pack of a Class I recall is caution, not stop" in flagged
    assert "offers a pack from an unaffected lot when every lot is recalled" in flagged
    letter = "What to do: Keep taking your docusate as prescribed, and call us on +1 202 555 0143."
    assert "says keep taking about a Class I recall" in sentence_problems(
        letter, verdict="caution", found=found, fact=fact, patient=_reader(row))

    patient = make_patient("SYN-SC1", [dict(drug="docusate", ndc="62295-0601-01", lot="ZZ1",
                                            dispensed_at=datetime(2016, 12, 1, tzinfo=UTC))])
    now = decide(patient, "Is my docusate safe?")
    assert now.verdict == "stop"
    assert sentence_problems(now.answer, verdict=now.verdict, found=found, fact=fact, patient=_reader(row)) == []


def test_outside_the_window_of_the_same_maker_is_not_other_makers(hashing_embeddings):
    fact = assert_claim(recall_claim("D-1113-2018", None)).fact  # Camber valsartan, expiry 7/2018 to 6/2020
    row = dispensed(drug="valsartan", ndc="31722-0745-30", lot="ZZ2", expiry=date(2021, 1, 1))
    assert explain(fact, row) is None
    then = ("No recall in our records covers the valsartan dispensed to you (ZZ2). Recalls of valsartan from other "
            "makers (D-1113-2018) list products (NDCs) other than the one dispensed to you.")
    flagged = sentence_problems(then, verdict="safe", found=None, fact=fact, patient=_reader(row))
    assert "outside the recall's window, told it is other makers" in flagged
    assert "says other makers without a product of another labeler" in flagged

    patient = make_patient("SYN-SC2", [dict(drug="valsartan", ndc="31722-0745-30", lot="ZZ2",
                                            expiry=date(2021, 1, 1))])
    now = decide(patient, "Is my valsartan safe?")
    assert now.verdict == "safe" and "outside that window" in now.answer
    assert sentence_problems(now.answer, verdict="safe", found=None, fact=fact, patient=_reader(row)) == []


def test_a_decoy_of_another_medicine_hears_nothing_of_the_recall(hashing_embeddings):
    fact = assert_claim(recall_claim("D-0502-2019", "4L67C035")).fact  # losartan
    row = dispensed(drug="metformin", lot="4L67C035")  # the same lot number, another medicine
    then = ("No recall in our records covers the metformin dispensed to you (4L67C035). There are recalls of other "
            "metformin lots (D-0502-2019), which were not dispensed to you.")
    assert "names a recall that is not about their medicine" in sentence_problems(
        then, verdict="safe", found=None, fact=fact, patient=_reader(row))

    patient = make_patient("SYN-SC3", [("metformin", "4L67C035")])
    now = decide(patient, "Is my metformin safe?")
    assert now.verdict == "safe" and "D-0502-2019" not in now.answer
    assert fact.id in now.load_bearing_ids  # it shares the lot's scope: still what "safe" rests on


def test_no_record_product_keys_packaging_and_an_english_sign_off(hashing_embeddings):
    fact = assert_claim(recall_claim("D-0502-2019", "4L67C035")).fact
    row = dispensed(drug="product:losart pot 50mg", ndc="13668-0409-30", lot="4L67C035")
    found = explain(fact, row)
    assert str(found.klass) == "confirmed"
    reader = _reader(row)
    assert "says no record though a row of theirs is the recalled product" in sentence_problems(
        "We have no record of losartan dispensed to you, so we cannot check your pack.", verdict="unknown",
        found=found, fact=fact, patient=reader)
    assert "shows an internal key" in sentence_problems(
        "The product:losart pot 50mg dispensed to you is from a recalled lot.", verdict="caution", found=found,
        fact=fact, patient=reader)
    flagged = sentence_problems("Recall D-0502-2019 of LOSARTAN POTASSIUM TABLETS, USP, 50 mg, 90-count bottle, lot "
                                "4L67C035.", verdict="caution", found=found, fact=fact, patient=reader)
    assert any("packaging" in p for p in flagged)
    assert "quotes lot 9ZZ9, neither the recall's nor the patient's" in sentence_problems(
        "The recalled lot 9ZZ9 is not yours.", verdict="caution", found=found, fact=fact, patient=reader)

    spanish = SimpleNamespace(display_name="Paciente Sintético", preferred_channel="email", preferred_language="es")
    outcome = SimpleNamespace(verdict="caution", subject="product:losart pot 50mg", answer="")
    letter = drafting.notice_text(spanish, "lot", outcome, fact, match_class="confirmed")
    assert sentence_problems(letter, verdict="caution", found=found, fact=fact, patient=_reader(row, language="es")) \
        == []
    assert "Losartan Potassium Tablets 50 mg" in letter and "product:" not in letter
    signed_in_english = letter.replace("El equipo de farmacéuticos de", "The pharmacists at")
    assert "English in a Spanish letter: 'The pharmacists at'" in sentence_problems(
        signed_in_english, verdict="caution", found=found, fact=fact, patient=_reader(row, language="es"))

    # A pack typed with words no vocabulary knows (a product text key), holding the recalled NDC and lot,
    # asked about by the recall's name for it: the answer is about that row, named by the recall's label.
    patient = make_patient("SYN-SC4", [dict(drug="ZYX HOUSE TABLET 50", ndc="13668-0409-30", lot="4L67C035")])
    assert patient.dispensings.get().drug.startswith("product:")
    now = decide(patient, "Is my losartan safe?", subject="losartan")  # the recall's name for it
    assert now.verdict == "caution" and "no record" not in now.answer
    assert "Do not stop Losartan Potassium Tablets 50 mg on your own" in now.answer
