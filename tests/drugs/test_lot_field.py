"""drugs.lot_field: a pharmacy's lot field read as a pharmacist reads it.

The shapes are written around REAL recalled lots (every lot-level record of the 2021 bulk file, read
by the product's own recall parser), so the reader is tested on the lots it will meet, not on one
example: a clean shape must give exactly the recalled lot (and the expiry it carries); any shape at
all must never lose the recalled lot (it is the lot, or one of the other lots the field may mean, which
drugs.matching treats as probable for the same product)."""

import random
from datetime import date

import pytest

from drugs.gs1 import gtin_for_ndc
from drugs.lot_field import is_placeholder_lot, read_lot_field
from drugs.lots import canonical_lot, printed_lot
from recalls.lots.parse import parse_scope
from tests.factories import SNAPSHOT_2021, read_results

EXPIRY = date(2026, 5, 31)

# Shapes in which the field says plainly what is the lot and what the expiry: read exactly.
CLEAN_SHAPES = [
    "{lot}", "{lower}", "LOT {lot}", "Lot# {lot}", "lot no. {lot}", "BATCH {lot}", "{lot} EXP 05/2026",
    "{lot} exp 05/26", "{lot} Exp: 05-2026", "{lot} EXP 2026-05", "{lot} EXP MAY 2026", "{lot} exp. May-26",
    "{lot} EXPIRY 31/05/2026", "{lot} EXP 05.2026", "{lot} EXP 052026", "{lot} EXP 0526", "{lot} EXP 260531",
    "{lot} (05/26)", "{lot} [2026-05]", "{lot} (EXP 05/2026)", "{lot}, 05/2026", "{lot}; 2026-05", "{lot} | 05/26",
    "EXP 05/26 LOT {lot}", "Exp 2026-05 {lot}", "{lot} - EXP: 05/2026", "{lot} E 05/26", "{lot} BUD 05/31/2026",
    "{lot} USE BY 05/2026", '="{lot}"', "'{lot}", "{lot}.", "*{lot}*", " {lot}  ", "LOT: {lot}  EXP: MAY 31, 2026",
    "(10){lot}", "{lot} SN 100000012345",
    # an expiry word set apart by a colon or an underscore, as by a space
    "{lot}:EXP 05/26", "{lot}:EXP 05/2026", "{lot}_EXP_052026", "{lot} :EXP: 05/26", "{lot}_BUD_05/31/2026",
    "{lot}:MFG 01/2024:EXP 05/26",
]
# Shapes that are clear but where a date beside the lot is read as its expiry.
DATE_BESIDE_SHAPES = ["{lot} 05/2026", "{lot} 05/26", "{lot} MAY 2026", "{lot}-05/2026", "{lot} / 2026-05",
                      "05/2026 {lot}", "{lot} 31MAY2026"]
# Shapes that cannot be read without doubt: the recalled lot must survive among the readings.
DOUBTFUL_SHAPES = ["{lot}-0526", "{lot} 0526", "{lot} 052026", "{lot} 202605", "L: {lot}", "LT {lot}",
                   "{lot} / 9999999", "{lot}, ZZ12345", "{lot} A1", "{lot} 2 PACKS",
                   # a suffix of the pharmacy's own or a repackager's date (MMDDYY) after the maker's lot
                   "{lot}-1", "{lot}.A", "{lot}-RP", "{lot}-071518", "{lot}-07152018"]
# Shapes where something is glued to the lot with no space or word the readings above look for: an expiry
# or code after any punctuation or none, or a marker before it. The lot must survive among the readings.
GLUED_SHAPES = ["{lot}/0526", "{lot}/052026", "{lot}_0526", "{lot}:0526", "{lot}=05/26", "L{lot}", "LT{lot}",
                "LOT{lot}", "L{lot}:EXP 05/26", "LT{lot}/0526", "{lot}#EXP#05-26",
                # the pack's NDC written before the lot
                "00378581477/{lot}", "00378-5814-77/{lot}", "00378581477-{lot}", "0378-5814-77 / {lot}"]


@pytest.fixture(scope="module")
def recalled_lots() -> list[str]:
    """Lots of real lot-level recalls (2021 bulk file), as the recall printed them; a seeded sample."""
    lots = set()
    for raw in read_results(SNAPSHOT_2021):
        scope = parse_scope(raw.get("code_info") or "", raw.get("more_code_info") or "")
        if scope.says_all_lots:
            continue
        for lot in scope.lot_numbers:
            printed = printed_lot(lot)
            # A lot that itself reads as a date or a marker word is not what these shapes are about.
            if len(canonical_lot(printed)) >= 4 and any(ch.isdigit() for ch in printed) and " " not in lot \
                    and read_lot_field(printed).lot == canonical_lot(printed):
                lots.add(printed)
    return random.Random(43).sample(sorted(lots), 400)


def _typed(shape: str, lot: str) -> str:
    return shape.format(lot=lot, lower=lot.lower())


@pytest.mark.parametrize("shape", CLEAN_SHAPES)
def test_a_clean_shape_gives_the_recalled_lot_and_its_expiry(recalled_lots, shape):
    wrong = []
    for lot in recalled_lots:
        read = read_lot_field(_typed(shape, lot))
        expected_expiry = EXPIRY if any(part in shape for part in ("05", "MAY", "May", "0526", "260531")) else None
        if read.lot != canonical_lot(lot) or read.expiry != expected_expiry:
            wrong.append((_typed(shape, lot), read.lot, read.expiry))
    assert not wrong, f"{len(wrong)} of {len(recalled_lots)} misread, e.g. {wrong[:5]}"


@pytest.mark.parametrize("shape", DATE_BESIDE_SHAPES)
def test_a_date_beside_the_lot_is_its_expiry_and_the_whole_field_stays_a_reading(recalled_lots, shape):
    wrong = []
    for lot in recalled_lots:
        typed = _typed(shape, lot)
        read = read_lot_field(typed)
        if read.lot != canonical_lot(lot) or read.expiry != EXPIRY or canonical_lot(typed) not in read.alternatives:
            wrong.append((typed, read.lot, read.expiry, read.alternatives))
    assert not wrong, f"{len(wrong)} of {len(recalled_lots)} misread, e.g. {wrong[:5]}"


@pytest.mark.parametrize("shape", CLEAN_SHAPES + DATE_BESIDE_SHAPES + DOUBTFUL_SHAPES + GLUED_SHAPES)
def test_no_shape_loses_the_recalled_lot(recalled_lots, shape):
    lost = []
    for lot in recalled_lots:
        read = read_lot_field(_typed(shape, lot))
        if canonical_lot(lot) not in {read.lot, *read.alternatives}:
            lost.append((_typed(shape, lot), read.lot, read.alternatives))
    assert not lost, f"{len(lost)} of {len(recalled_lots)} lost the lot, e.g. {lost[:5]}"


@pytest.mark.parametrize("shape", DOUBTFUL_SHAPES)
def test_a_doubtful_field_says_so_and_guesses_no_expiry(recalled_lots, shape):
    for lot in recalled_lots[:50]:
        read = read_lot_field(_typed(shape, lot))
        assert not read.clean and read.reading
        assert read.expiry is None


def test_gs1_element_strings_and_digital_links_in_the_lot_field(recalled_lots):
    gtin = gtin_for_ndc("0378-5814-77")
    for lot in recalled_lots[:100]:
        if not lot.isalnum() or len(lot) > 20:
            continue  # GS1 AI (10) carries letters and digits, at most 20
        for typed in (f"(01){gtin}(17)260531(10){lot}", f"]d201{gtin}17260531\x1d10{lot}",
                      f"01{gtin}17260531|10{lot}|21SERIAL1", f"https://id.gs1.org/01/{gtin}/10/{lot}?17=260531",
                      f"(01){gtin}(17)260500(10){lot}"):
            read = read_lot_field(typed)
            assert (read.lot, read.expiry, read.gtin) == (canonical_lot(lot), EXPIRY, gtin), typed
            assert read.clean and "GS1" in read.reading


def test_a_plain_lot_stays_the_lot_and_a_lot_ending_in_no_date_is_read_without_doubt(recalled_lots):
    """The glued readings add alternatives, never change the lot itself; a lot of letters and digits alone
    is doubtful only when it begins with a lot marker ("L3069020")."""
    changed = [(lot, read_lot_field(lot).lot) for lot in recalled_lots if read_lot_field(lot).lot != canonical_lot(lot)]
    assert not changed, changed[:5]
    assert read_lot_field("3069020").clean and read_lot_field("GS005603").clean and read_lot_field("M331J18").clean
    assert read_lot_field("22165-003").clean  # a hyphenated lot is not cut at its hyphen
    assert read_lot_field("00201125").clean  # digits alone are not cut where a month might be glued on
    assert read_lot_field("L3069020").alternatives == ("3069020",) and "glued" in read_lot_field("L3069020").reading


def test_a_field_that_says_there_is_no_lot_is_a_placeholder_and_no_real_lot_is():
    for typed in ("N/A", "n/a", "UNKNOWN", "Unknown lot", "NOT RECORDED", "not recorded", "SEE LABEL", "See pack",
                  "NO LOT", "no lot #", "0000", "00000", "XXX", "NOT AVAILABLE - SEE BOX", "lot number not known"):
        assert is_placeholder_lot(typed), typed
    for typed in ("", "  ", "3069020", "QJD", "X1", "00012", "NA1234", "NOT123", "SEE5"):
        assert not is_placeholder_lot(typed), typed


def test_no_real_recalled_lot_reads_as_a_placeholder():
    lots = {lot for raw in read_results(SNAPSHOT_2021)
            for lot in parse_scope(raw.get("code_info") or "", raw.get("more_code_info") or "").lot_numbers}
    assert len(lots) > 5000
    assert not [lot for lot in lots if is_placeholder_lot(lot)]


def test_a_field_of_nothing_but_markers_and_placeholders_names_no_lot():
    for typed in ("", "   ", "LOT", "EXP 05/2026", "LOT# EXP 05/26"):
        assert read_lot_field(typed).lot == "", typed
    assert read_lot_field("N/A").lot == "NA"  # the model refuses placeholders with its own message


def test_an_expiry_is_never_guessed_from_digits_that_may_be_the_lot():
    read = read_lot_field("3069020-0526")
    assert (read.lot, read.expiry) == ("30690200526", None)
    assert "3069020" in read.alternatives and "may be an expiry or part of the lot" in read.reading
    # A real lot with a hyphenated numeric part keeps it whole, cleanly.
    assert read_lot_field("22165-003").alternatives == ()
    assert read_lot_field("22165-003").lot == "22165003"


def test_month_year_in_either_order_and_day_zero_is_the_month_end():
    for typed in ("X123 EXP 05/2026", "X123 EXP 2026/05", "X123 EXP 26/05", "X123 EXP MAY26", "X123 EXP 2026MAY",
                  "X123 EXP 260500", "X123 EXP 05-26"):
        assert read_lot_field(typed).expiry == EXPIRY, typed
    assert read_lot_field("X123 EXP 01/02/2027").expiry == date(2027, 1, 2)  # US order
    assert read_lot_field("X123 EXP 13/02/2027").expiry == date(2027, 2, 13)  # day first only where it must be
    assert read_lot_field("X123 EXP 05/06").expiry == date(2006, 5, 31)  # MM/YY before YY/MM


def test_the_printed_text_is_kept_and_the_reading_says_how_it_was_read():
    read = read_lot_field("  Lot# 3069020  exp 05/26 ")
    assert read.text == "Lot# 3069020  exp 05/26" and read.printed == "3069020"
    assert read.reading == "expiry written in the field"
    assert read_lot_field("3069020").reading == ""
