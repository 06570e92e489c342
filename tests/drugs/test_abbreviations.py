"""Pharmacy abbreviations (drugs.abbreviations) on dispensing text: a pharmacy's print name
("LOSART POT 50MG TAB", "HYDROCOD/APAP 5-325") must reach the key FDA's name for the drug reaches, or a
patient holding a recalled lot of it is not even a candidate; an abbreviation with two meanings is
never guessed; recall subjects never read the table.

Till strings and patients here are SYNTHETIC; recall records are real openFDA records."""

import csv

import pytest

from drugs import abbreviations
from drugs.abbreviations import TableError, parse_table, spell_out, table
from drugs.identity import (
    ABBREVIATION_SOURCE,
    PRODUCT_SOURCE,
    SALT_WORDS,
    SOURCE,
    identity_key,
    is_product_key,
    product_key,
    resolve,
    resolve_dispensed,
    vocabulary,
)
from tests.factories import SNAPSHOT_2021, read_results
from tests.paths import FIXTURES

ENTRIES = list(table().values())


def entries_of(*kinds):
    return [pytest.param(entry, id=entry.abbreviation) for entry in ENTRIES if entry.kind in kinds]


# --- the table -----------------------------------------------------------------------------------------

def test_the_table_covers_salts_ingredients_truncations_and_forms():
    kinds = {kind: [e for e in ENTRIES if e.kind == kind] for kind in abbreviations.KINDS}
    assert sum(entry.expands for entry in ENTRIES) >= 150
    assert len(kinds["salt"]) >= 20 and len(kinds["ingredient"]) >= 40 and len(kinds["truncation"]) >= 80
    assert len(kinds["form"]) >= 20 and len(kinds["ambiguous"]) >= 20
    for wanted in ("POT", "NA", "HCL", "BESY", "SUCC", "TART", "MAL", "CIT", "SULF", "MES", "HCTZ", "APAP", "ASA",
                   "KCL", "NTG", "SMX", "SMZ", "TMP", "MVI", "MTX", "ER", "XL", "SR", "DR", "ODT", "EC", "DS", "SL"):
        assert table()[wanted].expands, wanted


@pytest.mark.parametrize("rows, message", [
    (["abbreviation,expansion,note\n"], ":1: the header"),
    (["abbreviation,expansion,kind,note\n", "POT,potassium,salty,USP\n"], ":2: kind 'salty'"),
    (["abbreviation,expansion,kind,note\n", "pot,potassium,salt,USP\n"], ":2: abbreviation 'pot'"),
    (["abbreviation,expansion,kind,note\n", "POT,Potassium,salt,USP\n"], ":2: expansion 'Potassium'"),
    (["abbreviation,expansion,kind,note\n", "MS,morphine,ambiguous,ISMP\n"], ":2: MS: an ambiguous entry"),
    (["abbreviation,expansion,kind,note\n", "POT,,salt,USP\n"], ":2: POT: an ambiguous entry"),
    (["abbreviation,expansion,kind,note\n", "POT,potassium,salt,\n"], ":2: POT: say where"),
    (["abbreviation,expansion,kind,note\n", "POT,potassium,salt,USP\n", "POT,potash,salt,USP\n"], ":3: POT is listed"),
    (["abbreviation,expansion,kind,note\n", "POT,potassium,salt\n"], ":2: 3 columns"),
])
def test_a_bad_row_of_the_table_is_refused_with_its_line(rows, message):
    with pytest.raises(TableError, match=message.replace("(", r"\(")):
        parse_table(rows, source="t.csv")


def test_no_abbreviation_is_a_word_that_ends_the_naming_part_of_a_text():
    # "LOT", "EXP", "NDC" end what resolve() reads of a text: one in the table would read lot codes as drugs.
    for marker in ("LOT", "EXP", "NDC", "UPC", "MFG", "MFR", "DIST", "RX"):
        assert marker not in table()


# --- each entry, round trip ------------------------------------------------------------------------------

@pytest.mark.parametrize("entry", entries_of("ingredient", "truncation"))
def test_an_ingredient_abbreviation_reads_as_its_spelled_out_name(entry):
    spelled = resolve(entry.expansion)
    assert spelled.resolved
    # The source says the table named it, unless the vocabulary already read it so (HCTZ, APAP).
    already = resolve(entry.abbreviation).key == spelled.key
    assert identity_key(entry.abbreviation) == (spelled.key, SOURCE if already else ABBREVIATION_SOURCE)
    assert identity_key(f"{entry.abbreviation.lower()} 10 mg tablet")[0] == spelled.key


@pytest.mark.parametrize("entry", entries_of("salt"))
def test_a_salt_abbreviation_folds_off_the_name_as_the_salt_does(entry):
    assert entry.expansion in SALT_WORDS
    assert identity_key(f"LOSART {entry.abbreviation} 50MG TAB")[0] == "losartan"
    assert identity_key(f"ZOLPIDEM {entry.abbreviation} 10MG")[0] == "zolpidem"


@pytest.mark.parametrize("entry", entries_of("form"))
def test_a_form_abbreviation_is_never_an_ingredient(entry):
    assert not resolve(entry.expansion).resolved
    assert not resolve_dispensed(entry.abbreviation).resolved
    assert identity_key(f"METFORMIN {entry.abbreviation} 500MG")[0] == "metformin"
    assert identity_key(f"LOSART POT {entry.abbreviation} 50MG")[0] == "losartan"


@pytest.mark.parametrize("entry", entries_of("product"))
def test_a_product_abbreviation_gives_the_product_key_recalls_print(entry):
    assert not resolve(entry.expansion).resolved
    assert identity_key(entry.abbreviation) == (product_key(entry.expansion), PRODUCT_SOURCE)


@pytest.mark.parametrize("entry", entries_of("ambiguous"))
def test_an_ambiguous_abbreviation_is_left_as_typed(entry):
    text = f"{entry.abbreviation} 10MG"
    assert spell_out(text, vocabulary()) == text
    assert resolve_dispensed(text) == resolve(text)
    assert abbreviations.abbreviations_in(text) == [entry]


# --- combinations, strengths, forms and separators -----------------------------------------------------

@pytest.mark.parametrize("text, key", [
    ("LISINOPRIL/HCTZ", "hydrochlorothiazide+lisinopril"),
    ("LISINOP/HCTZ 20-12.5MG TAB", "hydrochlorothiazide+lisinopril"),
    ("OXYCOD/APAP 5-325MG TAB", "acetaminophen+oxycodone"),
    ("HYDROCOD/APAP 10-325", "acetaminophen+hydrocodone"),
    ("TRIAMT/HCTZ 37.5-25MG", "hydrochlorothiazide+triamterene"),
    ("SMZ/TMP DS 800-160MG TAB", "sulfamethoxazole+trimethoprim"),
    ("AMOX/CLAV 875-125MG", "amoxicillin+clavulanic acid"),
    ("AMOX/K CLAV 500-125MG", "amoxicillin+clavulanic acid"),
    ("BUTALB/APAP/CAFF 50-325-40", "acetaminophen+butalbital+caffeine"),
    ("LIDO/PRILO 2.5-2.5% CRM", "lidocaine+prilocaine"),
    ("APAP W/COD #3", "acetaminophen+codeine"),
])
def test_a_combination_names_every_ingredient(text, key):
    assert identity_key(text)[0] == key


def test_a_combination_is_no_longer_filed_under_the_one_ingredient_the_vocabulary_knew():
    # Before the table, "OXYCOD/APAP" read as acetaminophen alone: a wrong medicine, not just a missing one.
    assert resolve("OXYCOD/APAP 5-325").key == "acetaminophen"
    assert resolve_dispensed("OXYCOD/APAP 5-325").key == "acetaminophen+oxycodone"


@pytest.mark.parametrize("text", ["SMX-TMP 800-160", "SMX/TMP 800/160", "smx tmp 800 160", "SMX, TMP DS",
                                  "Smx/Tmp Ds Tab", "SMZ-TMP DS (800-160 MG)"])
def test_separators_and_case_do_not_matter(text):
    assert identity_key(text)[0] == "sulfamethoxazole+trimethoprim"


@pytest.mark.parametrize("text", ["LOSART POT. 50 MG", "(LOSART POT) 50MG TAB", "LOSART-POT 100MG/TAB",
                                  "losart pot 25mg tablets"])
def test_punctuation_around_a_token_does_not_hide_it(text):
    assert identity_key(text)[0] == "losartan"


@pytest.mark.parametrize("text, key", [
    ("ATORVASTA 10MG TAB", "atorvastatin"),
    ("LEVOTHYROXI 50MCG", "levothyroxine"),
    ("ESCITALOPR 20MG", "escitalopram"),
    ("AMOXI 500MG CAP", "amoxicillin"),
    ("HYDROCODO/APAP 5-325", "acetaminophen+hydrocodone"),
])
def test_a_longer_cut_of_a_listed_name_reads_as_that_name(text, key):
    assert identity_key(text)[0] == key


@pytest.mark.parametrize("word", ["DOXYLAMINE", "GENTIAN", "AMOXAPINE", "POTENCY", "ASAP", "NASAL", "MALE"])
def test_only_whole_tokens_are_read_never_the_beginning_of_another_word(word):
    assert spell_out(f"{word} 25MG", vocabulary()) == f"{word} 25MG"


def test_a_brand_the_vocabulary_knows_is_not_rewritten_by_a_shorter_abbreviation():
    # PEG alone is polyethylene glycol; PEG-Intron is peginterferon.
    assert spell_out("PEG-INTRON 80MCG", vocabulary()) == "PEG-INTRON 80MCG"
    assert identity_key("PEG-INTRON 80MCG")[0] == resolve("PEG-INTRON").key != resolve("polyethylene glycol").key
    assert identity_key("PEG 3350 PWD")[0] == resolve("POLYETHYLENE GLYCOL 3350").key


# --- what is not an abbreviation ------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["PRN", "BID", "TID", "QD", "QHS", "TAB", "CAP", "TABS", "PRN PAIN",
                                  "1 TAB PO BID PRN", "LOT A12345", "M331J18-1", "ASA123", "HCTZ2024", "KCL1234X",
                                  "EXP 12/2026", "NDC 68788-0048-03"])
def test_directions_forms_and_lot_like_codes_name_no_drug(text):
    assert not resolve_dispensed(text).resolved
    key, source = identity_key(text)
    assert source in (PRODUCT_SOURCE, "unresolved") and (not key or is_product_key(key))


@pytest.mark.parametrize("text, key", [
    ("ALBUTEROL SULF HFA INH", "albuterol"),       # INH: inhaler here, never isoniazid
    ("COD LIVER OIL 1000MG CAP", "cod liver oil"),  # COD: not codeine
    ("MSO4 ER 15MG", None),                        # morphine or magnesium sulfate: a person decides
    ("HCT 25MG", None),                            # hydrochlorothiazide or hydrocortisone
    ("LEVO 500MG TAB", None),                      # levofloxacin, levothyroxine, levodopa...
    ("PREDNISO 10MG", None),                       # a longer cut of PREDNIS: prednisone or prednisolone
    ("MEDROXYPROG AC 10MG", "medroxyprogesterone"),  # AC left as typed; the name still reads
])
def test_an_abbreviation_with_two_meanings_is_not_guessed(text, key):
    identity = resolve_dispensed(text)
    if key is None:
        assert not identity.resolved
    else:
        assert identity.key == key


def test_a_lot_code_after_the_name_never_reaches_the_key():
    assert identity_key("LOSART POT 50MG TAB LOT ASA 123")[0] == "losartan"


# --- identity_key, the dispensing path -------------------------------------------------------------------

def test_identity_key_spells_out_dispensing_text_and_says_so():
    assert identity_key("LOSART POT 50MG TAB") == ("losartan", ABBREVIATION_SOURCE)
    assert identity_key("", "HYDROCOD/APAP 5-325MG TAB") == ("acetaminophen+hydrocodone", ABBREVIATION_SOURCE)
    assert identity_key("XYZZY 10MG", "LOSART POT 50MG") == ("losartan", ABBREVIATION_SOURCE)
    # A text the vocabulary already read the same way keeps its source: re-resolving changes nothing.
    assert identity_key("HCTZ 25MG") == ("hydrochlorothiazide", SOURCE)
    assert identity_key("Losartan Potassium 50 mg tablets") == ("losartan", SOURCE)


def test_what_the_table_cannot_name_keeps_the_product_text_as_typed():
    assert identity_key("ARNICA 30C POT") == (product_key("ARNICA 30C POT"), PRODUCT_SOURCE)
    assert identity_key("MVI W/ IRON TAB") == (product_key("multivitamin W/ IRON TAB"), PRODUCT_SOURCE)


def test_abbreviations_in_shows_how_a_text_was_read():
    used = abbreviations.abbreviations_in("LOSART POT 50MG TAB", vocabulary())
    assert [(e.abbreviation, e.kind) for e in used] == [("LOSART", "truncation"), ("POT", "salt"), ("TAB", "form")]


def _till_strings():
    with (FIXTURES / "synthetic_till_strings.csv").open(newline="") as handle:
        return [pytest.param(row["till_text"], row["fda_name"], id=row["till_text"]) for row in csv.DictReader(handle)]


@pytest.mark.parametrize("till_text, fda_name", _till_strings())
def test_a_till_string_meets_the_key_of_fdas_name(till_text, fda_name):
    expected = resolve(fda_name).key
    assert expected
    assert identity_key(till_text)[0] == expected


def test_the_till_strings_are_many_and_mostly_unreadable_without_the_table():
    rows = _till_strings()
    assert len(rows) >= 100
    read_before = sum(resolve(p.values[0]).key == resolve(p.values[1]).key for p in rows)
    assert read_before < len(rows) / 4


# --- recall subjects never read the table ----------------------------------------------------------------

def test_recall_subjects_do_not_go_through_the_table(monkeypatch):
    from recalls.record_identity import identity_of

    records = [r for r in read_results(SNAPSHOT_2021)
               if resolve_dispensed(r.get("product_description") or "").key
               != resolve(r.get("product_description") or "").key]
    assert len(records) >= 50  # texts the table would read differently (NaCl, Lido, KCl, DM, ...)
    subjects = [identity_of(record).subject for record in records]

    def refuse(*args, **kwargs):
        raise AssertionError("a recall subject was read through the pharmacy abbreviation table")

    monkeypatch.setattr(abbreviations, "spell_out", refuse)
    resolve.cache_clear()
    assert [identity_of(record).subject for record in records] == subjects
    monkeypatch.undo()
    dispensing_readings = [resolve_dispensed(record["product_description"]).key for record in records]
    assert sum(subject != reading for subject, reading in zip(subjects, dispensing_readings, strict=True)) >= 50


# --- the dispensing model (synthetic patient) ------------------------------------------------------------

@pytest.mark.django_db
def test_a_dispensing_row_typed_with_abbreviations_gets_the_ingredient_identity(patient):
    from patients.models import DispensingRecord
    from tests.factories import DISPENSED_AT

    row = DispensingRecord(patient=patient, synthetic=True, drug_text="HYDROCOD/APAP 5-325MG TAB", lot="AB123",
                           dispensed_at=DISPENSED_AT)
    row.save()
    row.refresh_from_db()
    assert (row.drug, row.drug_source) == ("acetaminophen+hydrocodone", ABBREVIATION_SOURCE)
    assert row.drug_text == "HYDROCOD/APAP 5-325MG TAB"
    assert not row.identity_unresolved


@pytest.mark.django_db
def test_a_re_saved_row_keeps_the_text_the_pharmacy_typed(patient):
    from patients.models import DispensingRecord
    from tests.factories import DISPENSED_AT

    row = DispensingRecord(patient=patient, synthetic=True, drug_text="LOSART POT 50MG TAB", lot="AB123",
                           dispensed_at=DISPENSED_AT)
    row.save()
    row = DispensingRecord.objects.get(pk=row.pk)
    row.lot = "AB124"
    row.save()
    row.refresh_from_db()
    assert row.drug == "losartan"  # the identity holds either way: no patient is missed
    assert (row.drug_text, row.drug_source) == ("LOSART POT 50MG TAB", ABBREVIATION_SOURCE)
