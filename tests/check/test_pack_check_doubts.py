"""Check my pack (ask.pack_check) says what it doubts and asks only for what would settle it, on REAL recall
records (tests/factories.py). No patient is involved.

- D-0971-2018 recalls every lot of Solco valsartan "within expiry" (expiry on or after July 13, 2018), and
  its text names NDC 43547-0370: a pack of it with a lot but no expiry may be recalled, and the check asks
  for the expiry date; with an expiry inside the window it is recalled.
- D-1303-2020 recalls every Apotex metformin ER lot within expiry; its text names NDC 60505-0260, and only
  openFDA's block lists 60505-0190 with it: a 60505-0190 pack is a candidate whose product is the doubt, so
  with its lot typed it may be recalled (asking for the lot again would loop), and with no lot the lot is
  asked for.
"""

import pytest

from ask import pack_words
from ask.pack_check import Outcome, check_pack, read_pack
from drugs import recall_terms
from memory.fact_writes import assert_claim
from tests.check.packs import gs1_texts
from tests.factories import recall_claim

pytestmark = pytest.mark.django_db(transaction=True)

SOLCO, SOLCO_NDC = "D-0971-2018", "43547-0370-09"  # openFDA prints it 43547-370-09
APOTEX, LISTED_ONLY_NDC = "D-1303-2020", "60505-0190-3"  # as openFDA's block prints it


def checked(**typed):
    return check_pack(read_pack(**typed))


@pytest.fixture
def solco(hashing_embeddings):
    return assert_claim(recall_claim(SOLCO, None)).fact


@pytest.fixture
def apotex(hashing_embeddings):
    return assert_claim(recall_claim(APOTEX, None)).fact


def test_a_window_recall_and_a_pack_without_its_expiry_may_be_recalled_and_the_expiry_is_asked(solco):
    assert recall_terms.window_kind(solco) == "expiry_window"
    assert "43547-0370" in recall_terms.named_products(solco)
    result = checked(ndc=SOLCO_NDC, lot="ZZ1")
    assert result.outcome == Outcome.MAY_BE_RECALLED
    assert result.date_needed == "expiry date"
    assert [r.number for r in result.recalls] == [SOLCO] and result.recalls[0].match == "probable"
    advice = pack_words.what_to_do(result)
    assert "expiry date" in advice and "treat it as recalled" in advice
    assert pack_words.headline(result) != pack_words.headline(checked(ndc=SOLCO_NDC, lot="ZZ1 EXP 12/2019"))


@pytest.mark.parametrize("typed", [dict(ndc=SOLCO_NDC, lot="ZZ1 EXP 12/2019"),
                                   dict(gs1=gs1_texts("43547-370-09", "ZZ1", expiry="191231")[0])],
                         ids=["typed", "scanned"])
def test_a_window_recall_and_a_pack_with_its_expiry_inside_is_recalled(solco, typed):
    result = checked(**typed)
    assert result.outcome == Outcome.RECALLED, typed
    assert result.date_needed == ""
    assert result.recalls[0].number == SOLCO and result.recalls[0].match == "product_all_lots"


def test_a_product_only_openfda_lists_with_its_lot_typed_may_be_recalled_not_asked_for_the_lot_again(apotex):
    # The fixture's record: its text names 60505-0260 only; openFDA's block also lists 60505-0190.
    assert "60505-0190" in recall_terms.products(apotex)
    assert "60505-0190" not in recall_terms.named_products(apotex)
    result = checked(ndc=LISTED_ONLY_NDC, lot="ZZ1")
    assert result.outcome == Outcome.MAY_BE_RECALLED
    assert result.outcome != Outcome.LOT_NEEDED
    assert [r.number for r in result.recalls] == [APOTEX] and result.recalls[0].match == "candidate"
    assert result.date_needed == ""  # the product is the doubt, not the date
    advice = pack_words.what_to_do(result)
    assert "pharmacist" in advice and "Type the lot number" not in advice


def test_a_product_only_openfda_lists_with_no_lot_still_asks_for_the_lot(apotex):
    result = checked(ndc=LISTED_ONLY_NDC)
    assert result.outcome == Outcome.LOT_NEEDED
    assert "lot number" in pack_words.what_to_do(result)
