"""Check my pack (ask.pack_check): every typed and scanned shape of a pack, held against REAL recall records
(tests/check/packs.py; the `recalls` fixture, tests/check/conftest.py). No patient is involved: nobody's
dispensing is read."""

import pytest

from ask import pack_words
from ask.pack_check import Outcome, PackInputError, check_pack, read_pack
from memory.fact_writes import assert_claim
from tests.check.packs import EVERY_LOT_NDC, EVERY_LOT_RECALL, VALSARTAN_LOT, VALSARTAN_NDC, VALSARTAN_RECALL, gs1_texts
from tests.factories import recall_claim

pytestmark = pytest.mark.django_db(transaction=True)


def checked(**typed):
    return check_pack(read_pack(**typed))


@pytest.mark.parametrize("ndc", [VALSARTAN_NDC, "00378-5807-93", "00378580793", "0378580793", "NDC 0378-5807-93",
                                 "NDC: 0378 5807 93", " 0378-5807-93 "])
@pytest.mark.parametrize("lot", [VALSARTAN_LOT, "LOT 3061169", "Lot# 3061169", "3061169 EXP 11/2018",
                                 "3061169 (11/18)", "LOT: 3061169, EXP 2018-11", "lot 3061169 exp nov-18"])
def test_the_recalled_lot_typed_as_printed_is_recalled(recalls, ndc, lot):
    result = checked(ndc=ndc, lot=lot)
    assert result.outcome == Outcome.RECALLED
    assert result.ndc == "00378-5807-93"
    assert [r.number for r in result.recalls] == [VALSARTAN_RECALL]
    shown = result.recalls[0]
    assert shown.match == "confirmed" and shown.classification == "Class II" and shown.lots == (VALSARTAN_LOT,)
    assert "NDEA" in shown.reason and "Valsartan" in shown.product


@pytest.mark.parametrize("index", range(5))
def test_a_scanned_recalled_pack_is_recalled_whatever_form_the_scan_takes(recalls, index):
    text = gs1_texts(VALSARTAN_NDC, VALSARTAN_LOT)[index]
    result = checked(gs1=text)
    assert result.outcome == Outcome.RECALLED, text
    assert result.ndc == "00378-5807-93" and result.lot == VALSARTAN_LOT


def test_a_scan_with_a_typed_lot_that_agrees_is_read_and_one_that_does_not_is_refused(recalls):
    text = gs1_texts(VALSARTAN_NDC, VALSARTAN_LOT)[0]
    assert checked(gs1=text, lot="LOT 3061169").outcome == Outcome.RECALLED
    with pytest.raises(PackInputError) as refused:
        read_pack(gs1=text, lot="3095511")
    assert "3061169" in refused.value.errors["lot"]
    with pytest.raises(PackInputError) as refused:
        read_pack(gs1=text, ndc="0378-5814-77")
    assert "ndc" in refused.value.errors


@pytest.mark.parametrize("lot", ["03061169", "3O61169", "306I169", "3061169-1118", "3061169 1118"])
def test_a_lot_that_may_be_the_recalled_one_is_never_not_recalled(recalls, lot):
    """Leading zero, O for 0, I for 1 (near misses), and digits that may be an expiry or the lot's end
    (read with doubt, ADR 0009): the pharmacist checks; the answer never says it is not recalled."""
    result = checked(ndc=VALSARTAN_NDC, lot=lot)
    assert result.outcome == Outcome.MAY_BE_RECALLED, lot
    assert result.recalls[0].number == VALSARTAN_RECALL and result.recalls[0].match == "probable"
    assert "pharmacist" in pack_words.what_to_do(result)
    assert "not on" not in pack_words.headline(result)


def test_a_product_only_openfda_lists_with_the_recalled_lot_may_be_recalled(recalls):
    result = checked(ndc="0378-5814-77", lot=VALSARTAN_LOT)
    assert result.outcome == Outcome.MAY_BE_RECALLED
    assert "openFDA" in result.recalls[0].rule


def test_another_lot_of_a_lot_level_recall_is_not_listed_and_never_called_safe(recalls):
    result = checked(ndc=VALSARTAN_NDC, lot="3095511")
    assert result.outcome == Outcome.NOT_LISTED
    assert [r.number for r in result.recalls] == [VALSARTAN_RECALL] and result.recalls[0].match == ""
    words = pack_words.headline(result) + " " + pack_words.what_to_do(result)
    assert "FDA recalls we know of" in words and "does not mean the medicine is safe" in words


def test_no_lot_for_a_product_with_lot_level_recalls_asks_for_the_lot(recalls):
    result = checked(ndc=VALSARTAN_NDC)
    assert result.outcome == Outcome.LOT_NEEDED
    assert "lot number" in pack_words.what_to_do(result)


@pytest.mark.parametrize("lot", ["", "ZZ1", "LOT 12345 EXP 12/2016"])
def test_a_recall_of_every_lot_recalls_the_pack_whatever_its_lot(recalls, lot):
    result = checked(ndc=EVERY_LOT_NDC, lot=lot)
    assert result.outcome == Outcome.RECALLED
    assert result.recalls[0].number == EVERY_LOT_RECALL and result.recalls[0].match == "product_all_lots"
    assert result.recalls[0].lots == () and result.classification == "Class I"
    advice = pack_words.what_to_do(result)
    assert "today" in advice and "keep taking" not in advice.lower() and "unaffected lot" not in advice


def test_a_recall_of_a_medicine_that_must_not_be_stopped_says_do_not_stop(recalls, hashing_embeddings):
    class_ii = checked(ndc=VALSARTAN_NDC, lot=VALSARTAN_LOT)
    assert class_ii.do_not_stop and "today" not in pack_words.what_to_do(class_ii)
    assert pack_words.what_to_do(class_ii).startswith("Do not stop taking it on your own")
    # The valsartan record reclassified Class I, as FDA republishes a record it escalates.
    assert_claim(recall_claim(VALSARTAN_RECALL, VALSARTAN_LOT, classification="Class I"))
    result = checked(ndc=VALSARTAN_NDC, lot=VALSARTAN_LOT)
    assert result.classification == "Class I" and result.do_not_stop
    assert pack_words.what_to_do(result).startswith("Do not stop taking it on your own")
    assert "today" in pack_words.what_to_do(result)


@pytest.mark.parametrize("ndc", ["12345-6789-01", "9999999999"])
def test_an_ndc_no_recall_we_know_of_names_is_unidentified_and_never_safe(recalls, ndc):
    result = checked(ndc=ndc, lot="ABC123")
    assert result.outcome == Outcome.UNIDENTIFIED and result.ndc == "" and result.recalls == ()
    words = pack_words.headline(result) + " " + pack_words.what_to_do(result)
    assert "could not identify" in words and "does not mean it is safe" in words


def test_a_scan_of_an_unknown_product_is_unidentified(recalls):
    assert checked(gs1=gs1_texts("1234-5678-90", "ABC123")[0]).outcome == Outcome.UNIDENTIFIED


@pytest.mark.parametrize(("typed", "field", "words"), [
    ({"ndc": "12-34"}, "ndc", "is not an NDC"),
    ({"ndc": "0378-5807-93-1"}, "ndc", "is not an NDC"),
    ({"ndc": "0378 5807 933 11"}, "ndc", "is not an NDC"),
    ({"ndc": "1" * 60}, "ndc", "characters long"),
    ({"ndc": VALSARTAN_NDC, "lot": "EXP 05/2026"}, "lot", "No lot number could be read"),
    ({"ndc": VALSARTAN_NDC, "lot": "NOT RECORDED"}, "lot", "No lot number could be read"),
    ({"ndc": VALSARTAN_NDC, "lot": "0000"}, "lot", "No lot number could be read"),
    ({"ndc": VALSARTAN_NDC, "lot": "L" * 150}, "lot", "characters long"),
    ({"lot": VALSARTAN_LOT}, "ndc", "Type the NDC"),
    ({}, "ndc", "Type the NDC"),
    ({"gs1": "hello there"}, "gs1", "could not be read"),
    ({"gs1": "0100303785807936"}, "gs1", "could not be read"),  # a wrong check digit
    ({"gs1": "10ABC123"}, "gs1", "no product code"),
    ({"gs1": "0104012345678901"}, "gs1", "not a US medicine"),
])
def test_malformed_input_is_refused_with_a_clear_message_on_its_field(typed, field, words):
    with pytest.raises(PackInputError) as refused:
        read_pack(**typed)
    assert words in refused.value.errors[field], refused.value.errors


def test_a_change_of_belief_reaches_the_next_check_though_the_versions_read_are_kept(recalls):
    """Fact versions are kept per process once read (ask.pack_check._read_facts); which versions are believed
    is read on every check, so a new version, or a retraction, is what the very next check answers from."""
    from memory.fact_writes import retract_claim
    from memory.models import Fact

    first = checked(ndc=VALSARTAN_NDC, lot=VALSARTAN_LOT)
    assert first.outcome == Outcome.RECALLED and first.recalls[0].classification == "Class II"
    assert_claim(recall_claim(VALSARTAN_RECALL, VALSARTAN_LOT, classification="Class I"), reason="escalated")
    escalated = checked(ndc=VALSARTAN_NDC, lot=VALSARTAN_LOT)
    assert escalated.outcome == Outcome.RECALLED and escalated.recalls[0].classification == "Class I"
    assert escalated.classification == "Class I"
    key = Fact.objects.believed().get(kind=Fact.Kind.RECALL, lot=VALSARTAN_LOT).fact_key
    retract_claim(key, reason="withdrawn in error (test)")
    withdrawn = checked(ndc=VALSARTAN_NDC, lot=VALSARTAN_LOT)
    assert withdrawn.outcome != Outcome.RECALLED and VALSARTAN_RECALL not in [r.number for r in withdrawn.recalls]
