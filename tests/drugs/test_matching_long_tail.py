"""drugs.matching on packs recorded the way pharmacy systems record them: a lot field holding more than
the lot, a product no vocabulary knows typed by its brand, a recall subject reduced to one ingredient.

Recalls are REAL openFDA records (tests/fixtures/openfda), read by recalls.ingest; dispensings are
synthetic, built as DispensingRecord builds them (patients.models: the identity key of the typed text,
the lot field read by drugs.lot_field)."""

from types import SimpleNamespace

import pytest

from drugs.identity import identity_key, texts_agree
from drugs.lot_field import read_lot_field
from drugs.matching import MatchClass, dispensed, explain
from drugs.ndc import normalize_ndc
from recalls.ingest import parse_enforcement, recall_claims
from tests.factories import openfda_record


def facts_of(recall_number):
    parsed = parse_enforcement(openfda_record(recall_number))
    return [SimpleNamespace(kind=c.kind, subject=c.subject, lot=c.lot, attributes=c.attributes, fact_key=c.fact_key,
                            statement=c.statement)
            for c in recall_claims(parsed, subject=parsed.subject, ndcs=parsed.ndcs)]


def fact_for_lot(recall_number, lot):
    return next(f for f in facts_of(recall_number) if f.lot == lot)


def pack(text: str, lot_field: str, ndc: str = ""):
    """A dispensing as the model stores it: identity of the typed text, the lot field read."""
    read = read_lot_field(lot_field)
    return dispensed(drug=identity_key(text)[0], ndc=normalize_ndc(ndc) if ndc else "", lot=read.lot,
                     expiry=read.expiry, alternatives=read.alternatives)


@pytest.mark.parametrize("field", ["3069020 EXP 05/2026", "LOT# 3069020 (05/26)", "3069020, 2026-05",
                                   "(01)00303785814771(17)260531(10)3069020", "3069020 MAY 2026"])
def test_a_lot_field_carrying_its_expiry_still_confirms_the_recalled_pack(field):
    fact = fact_for_lot("D-0326-2019", "3069020")
    assert explain(fact, pack("Valsartan 160 mg tablets", field, "0378-5814-77")).klass == MatchClass.CONFIRMED


@pytest.mark.parametrize("field", ["3069020-0526", "3069020 0526", "L: 3069020", "3069020 / 3069021"])
def test_a_field_read_with_doubt_is_probable_for_the_same_product_and_names_its_rule(field):
    fact = fact_for_lot("D-0326-2019", "3069020")
    found = explain(fact, pack("Valsartan 160 mg tablets", field, "0378-5814-77"))
    assert found.klass in (MatchClass.CONFIRMED, MatchClass.PROBABLE)
    if found.klass == MatchClass.PROBABLE:
        assert "written inside the lot field" in found.rule


def test_a_recalled_lot_inside_a_field_never_matches_another_product():
    fact = fact_for_lot("D-0326-2019", "3069020")
    # The same lot digits inside the field of another maker's pack of another drug: no match.
    assert explain(fact, pack("Metformin 500 mg tablets", "3069020-0526", "0093-1048-01")) is None
    # No NDC and another drug: no match either (a lot never matches on its own).
    assert explain(fact, pack("Metformin 500 mg tablets", "3069020-0526")) is None


def test_a_hand_sanitizer_typed_by_its_brand_matches_a_recall_reduced_to_its_ingredient():
    fact = fact_for_lot("D-0782-2022", "G20127E")  # Class I, artnaturals; the subject read as "ethanol"
    assert fact.subject == "ethanol"
    found = explain(fact, pack("artnaturals Scent Free Hand Sanitizer 8 oz", "G20127E"))
    assert found.klass == MatchClass.PROBABLE and "product name" in found.rule
    # The same lot typed for another brand of sanitizer is not this product.
    assert explain(fact, pack("Purell Advanced Hand Sanitizer", "G20127E")) is None


def test_a_homeopathic_typed_by_its_brand_matches_by_product_name_and_lot():
    fact = fact_for_lot("D-0439-2023", "222076")  # NaturalCare bioAllers Mold, Yeast and Dust
    assert explain(fact, pack("NaturalCare bioAllers Mold Yeast Dust drops", "LOT 222076")).klass in (
        MatchClass.PROBABLE, MatchClass.CONFIRMED)
    assert explain(fact, pack("bioAllers", "222076 exp 11/2025")).klass == MatchClass.PROBABLE


def test_a_name_alone_is_a_candidate_for_an_all_lots_recall_never_more():
    record = next(f for f in facts_of("D-0932-2019") if f.lot is None or True)
    assert record is not None
    fact = fact_for_lot("D-0932-2019", "AUS-100117H")
    # Lot not recorded: the product name proposes a candidate for the pharmacist.
    unknown = dispensed(drug=identity_key("NET Remedies #24 oral liquid")[0], lot="", lot_unknown=True)
    assert explain(fact, unknown).klass == MatchClass.CANDIDATE


def test_truncated_and_branded_names_agree_generic_category_words_do_not():
    assert texts_agree("product:losart pot", "Losartan Potassium Tablets USP")
    assert texts_agree("product:boiron arnicare gel", "Arnicare Arnica Montana 30C")
    assert not texts_agree("product:purell advanced hand sanitizer", "artnaturals hand sanitizer")
    assert not texts_agree("product:los", "Losartan")  # too short to stand for a name


def test_a_recall_subject_sharing_an_ingredient_with_the_pack_is_probable_with_the_exact_lot():
    fact = fact_for_lot("D-0080-2021", "1931102AL")  # subject aloe vera leaf+ethanol
    assert "+" in fact.subject
    found = explain(fact, dispensed(drug="ethanol", lot="1931102AL"))
    assert found.klass == MatchClass.PROBABLE and "shares an ingredient" in found.rule
    assert explain(fact, dispensed(drug="ethanol", lot="1931102")) is None  # not the lot
