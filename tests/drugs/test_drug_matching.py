"""drugs.matching: match classes from real recalls (openFDA 2021 bulk file), and exposure through them.

The dispensing rows are synthetic; the recalls are real records parsed by recalls.ingest."""

import json
import zipfile
from datetime import UTC, date, datetime
from functools import lru_cache
from types import SimpleNamespace

import pytest

from drugs.identity import resolve
from drugs.matching import MatchClass, match
from recalls.ingest import parse_enforcement, recall_claims
from tests.paths import OPENFDA

# The repository's copy of ../shared/fixtures/openfda (byte-identical; tests/fixtures/openfda/README.md).
BULK_2021 = OPENFDA / "drug-enforcement-2021-04-28.json.zip"


@lru_cache(maxsize=1)
def bulk_records() -> dict:
    path = BULK_2021
    if not path.exists():
        pytest.skip("the openFDA 2021 bulk fixture is not on this machine")
    with zipfile.ZipFile(path) as archive:
        data = json.loads(archive.read(archive.namelist()[0]))
    return {r["recall_number"]: r for r in data["results"]}


def facts_of(recall_number):
    parsed = parse_enforcement(bulk_records()[recall_number])
    return [SimpleNamespace(kind=c.kind, subject=c.subject, lot=c.lot, attributes=c.attributes, fact_key=c.fact_key)
            for c in recall_claims(parsed, subject=parsed.subject, ndcs=parsed.ndcs)]


def fact_for_lot(recall_number, lot):
    return next(f for f in facts_of(recall_number) if f.lot == lot)


def dispensing(text, ndc, lot, **extra):
    ndc11 = ndc and __import__("drugs.ndc", fromlist=["normalize_ndc"]).normalize_ndc(ndc)
    return SimpleNamespace(drug=resolve(text).key, ndc=ndc11 or "", lot=lot, lot_known=bool(lot), **extra)


def test_losartan_potassium_tablets_with_the_recalled_ndc_and_lot_is_confirmed():
    fact = fact_for_lot("D-1281-2019", "A1818G")
    assert fact.subject == "losartan" and "68788-0048" in fact.attributes["ndc_products"]
    assert match(fact, dispensing("Losartan Potassium 50 mg tablets", "68788-0048-03", "A1818G")) == \
        MatchClass.CONFIRMED


def test_diovan_with_the_recalled_ndc_and_lot_is_confirmed():
    fact = fact_for_lot("D-0326-2019", "3069020")
    assert fact.subject == "valsartan"
    assert match(fact, dispensing("Diovan", "00378-5814-77", "3069020")) == MatchClass.CONFIRMED


def test_ndc_product_and_lot_match_even_when_the_identity_keys_differ():
    fact = fact_for_lot("D-0326-2019", "3069020")
    unresolved = SimpleNamespace(kind="recall", subject="", lot=fact.lot, attributes=fact.attributes,
                                 fact_key=fact.fact_key)
    assert match(unresolved, dispensing("Vals 160", "00378-5814-77", "3069020")) == MatchClass.CONFIRMED


def test_a_lot_never_matches_on_its_own():
    fact = fact_for_lot("D-0326-2019", "3069020")
    assert match(fact, dispensing("Escitalopram 10 mg", "", "3069020")) is None  # other drug, same lot
    # Another labeler's NDC, same ingredients and lot: a repackaged pack is possible, so probable, never
    # confirmed; another drug with the same lot stays no match.
    assert match(fact, dispensing("Valsartan 160 mg", "68180-0100-09", "3069020")) == MatchClass.PROBABLE
    assert match(fact, dispensing("Valsartan 160 mg", "", "3069020")) == MatchClass.PROBABLE  # no NDC
    assert match(fact, dispensing("Valsartan 160 mg", "00378-5814-77", "3069099")) is None  # other lot


def test_an_unknown_lot_is_a_candidate_not_a_miss():
    fact = fact_for_lot("D-0326-2019", "3069020")
    assert match(fact, dispensing("Diovan", "00378-5814-77", "")) == MatchClass.CANDIDATE
    assert match(fact, dispensing("Valsartan", "", "")) == MatchClass.CANDIDATE


def test_drug_level_recalls_match_the_product_or_as_a_candidate():
    fact = SimpleNamespace(kind="recall", subject="valsartan", lot=None, fact_key="recall:X:drug",
                           attributes={"scope": "drug", "ndcs": ["00378-5814-77"], "ndc_products": ["00378-5814"]})
    assert match(fact, dispensing("Diovan", "00378-5814-77", "ANY")) == MatchClass.PRODUCT_ALL_LOTS
    assert match(fact, dispensing("Valsartan", "", "ANY")) == MatchClass.CANDIDATE
    assert match(fact, dispensing("Valsartan", "68180-0100-09", "ANY")) is None


def test_an_all_lots_recall_with_an_expiry_window_excludes_packs_known_to_be_outside_it():
    fact = SimpleNamespace(kind="recall", subject="valsartan", lot=None, fact_key="recall:X:drug",
                           attributes={"scope": "drug", "ndc_products": ["00378-5814"],
                                       "lot_scope": {"kind": "all_lots_window", "lots": [],
                                                     "expiry_window": ["2019-01-01", "2019-12-31"]}})
    inside = dispensing("Diovan", "00378-5814-77", "L1", expiry=date(2019, 6, 30))
    outside = dispensing("Diovan", "00378-5814-77", "L1", expiry=date(2021, 6, 30))
    unknown = dispensing("Diovan", "00378-5814-77", "L1", expiry=None)
    assert match(fact, inside) == MatchClass.PRODUCT_ALL_LOTS
    assert match(fact, outside) is None
    assert match(fact, unknown) == MatchClass.PRODUCT_ALL_LOTS


def test_a_month_window_covers_its_whole_end_month_and_its_whole_start_month():
    from recalls.lots.parse import parse_scope

    # D-1113-2018: "All Lots with expiration dates 7/2018 to 6/2020" -> ["2018-07", "2020-06"]
    scope = parse_scope("All Lots with expiration dates 7/2018 to 6/2020").as_attribute()
    assert scope["expiry_window"] == ["2018-07", "2020-06"]
    fact = SimpleNamespace(kind="recall", subject="valsartan", lot=None, fact_key="recall:X:drug",
                           attributes={"scope": "drug", "ndc_products": ["00378-5814"], "lot_scope": scope})

    def expiring(day):
        return dispensing("Diovan", "00378-5814-77", "L1", expiry=day)

    assert match(fact, expiring(date(2020, 6, 30))) == MatchClass.PRODUCT_ALL_LOTS
    assert match(fact, expiring(date(2018, 7, 1))) == MatchClass.PRODUCT_ALL_LOTS
    assert match(fact, expiring(date(2020, 7, 1))) is None
    assert match(fact, expiring(date(2018, 6, 30))) is None
    # a year-precise end covers its whole year
    fact.attributes["lot_scope"] = dict(scope, expiry_window=[None, "2016"])
    assert match(fact, expiring(date(2016, 12, 31))) == MatchClass.PRODUCT_ALL_LOTS
    assert match(fact, expiring(date(2017, 1, 1))) is None


def test_only_within_expiry_takes_the_recall_date_as_its_start():
    # D-0588-2016 (recalled 2015-08-19): "All lots with expiration dates up to 11/17/2015": no start written
    assert parse_enforcement(bulk_records()["D-0588-2016"]).attributes["lot_scope"]["expiry_window"] == [
        None, "2015-11-17"]
    # D-1833-2015 (recalled 2015-09-10): "All Lots Not Expired and Distributed Before 8/5/15."
    scope = parse_enforcement(bulk_records()["D-1833-2015"]).attributes["lot_scope"]
    assert (scope["expiry_window"], scope["dispensed_window"]) == (["2015-09-10", None], None)


def test_the_openfda_block_naming_another_drug_is_flagged_and_its_ndcs_ignored():
    parsed = parse_enforcement(bulk_records()["D-1110-2015"])
    assert parsed.subject == "clarithromycin"
    assert "captopril" in parsed.identity["identity_flag"]
    assert all(not ndc.startswith("64679-902") for ndc in parsed.ndcs)


def test_triple_combination_recalls_are_filed_under_all_three_ingredients():
    triples = [r for r in bulk_records().values()
               if "amlodipine" in (r.get("product_description") or "").lower()
               and "valsartan" in r["product_description"].lower()
               and "hydrochlorothiazide" in r["product_description"].lower()]
    assert triples
    for record in triples:
        assert parse_enforcement(record).subject == "amlodipine+hydrochlorothiazide+valsartan", record["recall_number"]


# --- exposure through the database ---------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_exposure_finds_the_losartan_and_diovan_patients(hashing_embeddings):
    from memory.fact_writes import assert_claim
    from patients.services import active_recalls_for_dispensing, exposed_patients_for_recall
    from tests.factories import make_patient, recall_claims_of

    when = datetime(2019, 6, 1, tzinfo=UTC)
    make_patient("losartan", [("Losartan Potassium 50 mg tablets", "A1818G", "68788-0048-03")], dispensed_at=when)
    diovan = make_patient("diovan", [("Diovan", "3069020", "00378-5814-77")], dispensed_at=when)
    make_patient("other-maker", [("Losartan Potassium 50 mg", "A1818G", "00093-7365-98")], dispensed_at=when)
    record = diovan.dispensings.get()
    assert record.drug == "valsartan" and record.drug_text == "Diovan" and record.ndc_product == "00378-5814"
    for number in ("D-1281-2019", "D-0326-2019"):
        for claim in recall_claims_of(number):
            assert_claim(claim)
    exposures = exposed_patients_for_recall("D-1281-2019")
    # Another labeler's NDC with the same ingredients and the recalled lot: a repackaged pack, probable.
    assert [(e.patient.external_ref, e.match_class) for e in exposures] == [
        ("losartan", MatchClass.CONFIRMED), ("other-maker", MatchClass.PROBABLE)]
    assert "repackaged" in exposures[1].rule
    exposures = exposed_patients_for_recall("D-0326-2019")
    assert [(e.patient.external_ref, e.match_class) for e in exposures] == [("diovan", MatchClass.CONFIRMED)]
    assert [f.fact_key for f in active_recalls_for_dispensing(record)] == ["recall:D-0326-2019:lot:3069020"]


def test_a_strength_only_openfdas_listing_block_names_is_probable_never_confirmed():
    """D-0293-2021 recalls Daytrana 10 mg (its text: NDC 68968-5552-3); openFDA's block lists every
    strength of the listing, 5552 to 5555. The 30 mg patch (5555) with the same lot number is not what
    the recall names: a pharmacist checks it (probable), it is not a confirmed exposure; the 10 mg is."""
    fact = fact_for_lot("D-0293-2021", "87579")
    assert "68968-5555" in fact.attributes["ndc_products"]
    assert fact.attributes["named_ndc_products"] == ["68968-5552"]
    assert match(fact, dispensing("Daytrana 10 mg", "68968-5552-03", "87579")) == MatchClass.CONFIRMED
    assert match(fact, dispensing("Daytrana 30 mg", "68968-5555-03", "87579")) == MatchClass.PROBABLE
    assert match(fact, dispensing("Daytrana 30 mg", "68968-5555-03", "")) == MatchClass.CANDIDATE
    assert match(fact, dispensing("Daytrana 30 mg", "68968-5555-03", "88888")) is None


def test_a_record_whose_text_names_no_ndc_confirms_by_every_product_it_lists():
    fact = fact_for_lot("D-0326-2019", "3069020")
    assert match(fact, dispensing("Diovan", "00378-5814-77", "3069020")) == MatchClass.CONFIRMED
    old = SimpleNamespace(**{**vars(fact), "attributes": {k: v for k, v in fact.attributes.items()
                                                          if k != "named_ndc_products"}})
    assert match(old, dispensing("Diovan", "00378-5814-77", "3069020")) == MatchClass.CONFIRMED


def test_a_distribution_window_never_drops_a_patient_dispensed_after_its_end():
    from recalls.lots.parse import parse_scope

    # D-0587-2020 (real): "All lots filled 08/26/2019 and dispensed 08/26-29/2019 remaining within expiry."
    scope = parse_scope(bulk_records()["D-0587-2020"]["code_info"]).as_attribute()
    assert scope["dispensed_window"] == ["2019-08-26", "2019-08-29"]
    fact = SimpleNamespace(kind="recall", subject="valsartan", lot=None, fact_key="recall:X:drug",
                           attributes={"scope": "drug", "ndc_products": ["00378-5814"], "lot_scope": scope})

    def dispensed(day):
        return dispensing("Diovan", "00378-5814-77", "L1", dispensed_at=datetime(*day, 12, tzinfo=UTC))

    assert match(fact, dispensed((2019, 8, 27))) == MatchClass.PRODUCT_ALL_LOTS
    assert match(fact, dispensed((2019, 9, 15))) == MatchClass.PRODUCT_ALL_LOTS  # after the end: still in
    assert match(fact, dispensed((2019, 8, 25))) is None  # before it opened: cannot come from it
