"""A letter says no more, and no less, than is known of the pack: on REAL openFDA recall records built by the
ingestion code (tests/factories.py); patients and dispensing are synthetic.

- A pack confirmed as a recalled lot (Class II) is not hedged with "If it is affected".
- A recall of every lot within an expiry window (D-0971-2018, Solco valsartan, "All lots within expiry.",
  expiry on or after July 13, 2018) reaches a pack of the product it names with no expiry on record (fail
  safe) but says it *may* affect it; with an expiry inside the window it affects it. The verdict is the same.
- A recall first read with no lot number and amended to name its lots is not "withdrawn".
- The recalled lot on a pack whose product cannot be identified (drugs.matching.UNIDENTIFIED_PACK) is said as
  such, not as "a recall of some batches of" the pack's own till name.
"""

from datetime import date

import pytest
from django.utils.translation import override

from corrections import drafting
from corrections.models import Correction
from corrections.review import redraft
from corrections.sweep.run import sweep
from drugs.matching import UNIDENTIFIED_PACK, MatchClass, dispensed, explain
from memory.fact_writes import assert_claim, assert_claims, retract_claim
from tests.factories import make_patient, recall_claim, recall_claims_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]

HEDGE = "If it is affected"
# D-0326-2019: Class II, Mylan valsartan 160 mg; its text names NDC 0378-5814-77 and lot 3069020 among others.
MYLAN, MYLAN_LOT, MYLAN_NDC = "D-0326-2019", "3069020", "0378-5814-77"
# D-0971-2018: Class II, Solco valsartan, "All lots within expiry."; its text names NDC 43547-0370.
SOLCO, SOLCO_NDC = "D-0971-2018", "43547-0370-09"
MAY_SUBJECT = "Update about a recall that may affect your medicine"
RECALLED_SUBJECT = "Update about your recalled medicine"


def _notice(patient, recall_number) -> Correction:
    return Correction.objects.get(patient=patient, recall_number=recall_number, kind="notice",
                                  status__in=("draft", "approved", "sent"))


# --- the pack instruction: no "if it is affected" for a pack that is the recalled one ----------------------

@pytest.mark.parametrize("certainty", [MatchClass.CONFIRMED, MatchClass.PRODUCT_ALL_LOTS])
def test_a_recalled_pack_is_told_it_will_be_replaced_without_a_hedge(certainty):
    said = drafting.pack_instruction("caution", certainty=str(certainty))
    assert HEDGE not in said and "We will replace it free of charge" in said
    with override("es"):
        spanish = drafting.pack_instruction("caution", certainty=str(certainty))
    assert spanish != said and "Si está afectado" not in spanish and "sin costo" in spanish


@pytest.mark.parametrize("certainty", [MatchClass.PROBABLE, MatchClass.CANDIDATE, ""])
def test_a_pack_that_may_be_recalled_is_still_told_if_it_is_affected(certainty):
    assert HEDGE in drafting.pack_instruction("caution", certainty=str(certainty))
    assert HEDGE in drafting.pack_instruction("caution")


def test_the_notice_for_a_confirmed_class_ii_lot_does_not_hedge(hashing_embeddings, no_auto_sweep):
    assert_claim(recall_claim(MYLAN, MYLAN_LOT))
    holder = make_patient("SYN-CONF", [("Valsartan Tablets USP 160 mg", MYLAN_LOT, MYLAN_NDC)])
    sweep()
    notice = _notice(holder, MYLAN)
    assert (notice.new_verdict, notice.match_class) == ("caution", MatchClass.CONFIRMED)
    assert notice.classification == "Class II"
    assert HEDGE not in notice.drafted_text, notice.drafted_text
    assert "We will replace it free of charge" in notice.drafted_text
    assert "so we can replace your pack" in notice.drafted_text and "check your pack" not in notice.drafted_text
    assert notice.message.subject == RECALLED_SUBJECT


# --- a recall of every lot in an expiry window, a pack with or without its expiry on record ----------------

def test_stated_class_says_probable_for_a_window_recall_without_the_date():
    from drugs.matching import stated_class  # added with the change under test

    fact = assert_claim(recall_claim(SOLCO, None)).fact
    assert fact.attributes["lot_scope"]["expiry_window"][0] == "2018-07-13"
    undated = dispensed(ndc=SOLCO_NDC, lot="ZZ-SYN-1")
    inside = dispensed(ndc=SOLCO_NDC, lot="ZZ-SYN-2", expiry=date(2019, 12, 31))
    # The decision is the same: both are in (an unknown expiry stays in, fail safe).
    assert explain(fact, undated).klass == explain(fact, inside).klass == MatchClass.PRODUCT_ALL_LOTS
    assert stated_class(MatchClass.PRODUCT_ALL_LOTS, fact, [undated]) == MatchClass.PROBABLE
    assert stated_class(MatchClass.PRODUCT_ALL_LOTS, fact, [inside]) == MatchClass.PRODUCT_ALL_LOTS
    assert stated_class(MatchClass.PRODUCT_ALL_LOTS, fact, [undated, inside]) == MatchClass.PRODUCT_ALL_LOTS
    # A recall of every lot with no window: the product is the recalled one, date or none.
    every_lot = assert_claim(recall_claim("D-0219-2017", None)).fact  # docusate, every lot, no window
    assert stated_class(MatchClass.PRODUCT_ALL_LOTS, every_lot, [dispensed(ndc="62295-0601-01", lot="ZZ1")]) \
        == MatchClass.PRODUCT_ALL_LOTS
    assert stated_class(MatchClass.CONFIRMED, fact, [undated]) == MatchClass.CONFIRMED


def test_a_window_recall_may_affect_a_pack_without_its_expiry_and_affects_one_inside(hashing_embeddings,
                                                                                     no_auto_sweep):
    assert_claim(recall_claim(SOLCO, None))
    undated = make_patient("SYN-WIN-U", [("valsartan", "ZZ-SYN-1", SOLCO_NDC)])
    inside = make_patient("SYN-WIN-D", [dict(drug="valsartan", lot="ZZ-SYN-2", ndc=SOLCO_NDC,
                                             expiry=date(2019, 12, 31))])
    sweep()
    may, sure = _notice(undated, SOLCO), _notice(inside, SOLCO)
    assert may.new_verdict == sure.new_verdict == "caution"  # the verdict is unchanged: the pack stays in
    assert may.match_class == MatchClass.PROBABLE
    assert may.message.subject == MAY_SUBJECT
    assert "may affect" in may.drafted_text and "affects" not in may.drafted_text, may.drafted_text
    assert HEDGE in may.drafted_text
    assert sure.match_class == MatchClass.PRODUCT_ALL_LOTS
    assert sure.message.subject == RECALLED_SUBJECT
    assert "affects" in sure.drafted_text and "may affect" not in sure.drafted_text, sure.drafted_text
    assert HEDGE not in sure.drafted_text


# --- a recall amended to name its lots is not withdrawn --------------------------------------------------

def test_a_retracted_every_lot_claim_of_a_recall_that_now_names_its_lots_is_not_withdrawn(hashing_embeddings):
    # D-0326-2019 as first read with no lot number (code_info empty: ingestion claims every lot), then as
    # FDA's record stands, naming its lots; the claim of every lot is retracted.
    first = assert_claim(recall_claim(MYLAN, None, code_info="")).fact
    assert first.lot is None and first.fact_key == f"recall:{MYLAN}:drug"
    assert_claims(recall_claims_of(MYLAN))
    retracted = retract_claim(first.fact_key, reason="amended: the record now names its lots")
    said = drafting.what_changed(first, retracted)
    assert said == "the recall now names the batches it covers"
    assert "withdrawn" not in said
    with override("es"):
        assert drafting.what_changed(first, retracted) == "el retiro ahora indica los lotes que abarca"


def test_a_retracted_recall_with_nothing_of_it_left_is_withdrawn(hashing_embeddings):
    fact = assert_claim(recall_claim(SOLCO, None)).fact
    retracted = retract_claim(fact.fact_key, reason="withdrawn (test)")
    assert drafting.what_changed(fact, retracted) == "the recall has been withdrawn"
    # A lot retracted says which lot, as before.
    lot = assert_claim(recall_claim(MYLAN, MYLAN_LOT)).fact
    assert drafting.what_changed(lot, retract_claim(lot.fact_key, reason="lot removed (test)")) == \
        f"the recall no longer includes lot {MYLAN_LOT}"


# --- the recalled lot on a pack whose product we cannot identify ------------------------------------------

def test_the_recalled_lot_on_an_unidentified_pack_is_named_truly(hashing_embeddings, no_auto_sweep):
    """A till name the vocabulary cannot read ("VALS 160MG TAB") under a repackager's NDC the recall does not
    list (50090-4455-0), with the exact recalled lot 3069020 of D-0326-2019."""
    assert_claims(recall_claims_of(MYLAN))
    holder = make_patient("SYN-UNID", [dict(drug="VALS 160MG TAB", lot=MYLAN_LOT, ndc="50090-4455-0")])
    row = holder.dispensings.get()
    assert row.drug.startswith("product:")  # the vocabulary cannot read it
    sweep()
    notice = _notice(holder, MYLAN)
    assert (notice.new_verdict, notice.match_class) == ("caution", MatchClass.CANDIDATE)
    assert [entry["rule"] for entry in notice.matched_lots] == [UNIDENTIFIED_PACK]
    text = notice.drafted_text
    assert "names the lot number of the" in text, text
    assert "cannot tell whether your pack is the product it recalls" in text
    assert "a recall of some batches of Vals" not in text and "some batches of VALS" not in text
    assert notice.message.subject == MAY_SUBJECT
    # Redrafted on review (another channel), the sentence is the same.
    assert "names the lot number of the" in redraft(notice, channel="email")
