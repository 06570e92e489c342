"""recalls.lots.parse_scope on real openFDA code_info, one test per class of lot-reading error.

Every string is read from the real fixtures by recall number (development pool only: none of these
records is in the evaluation split, tests/fixtures/lots_split.json).
"""

import json
import re
import time
import zipfile
from functools import lru_cache

import pytest

from recalls.lots.parse import extract_lots, mentions_all_lots, parse_scope
from recalls.lots.scope import scope_terms, stored_scope
from tests.paths import FIXTURES

SNAPSHOTS = {"2021": FIXTURES / "openfda" / "drug-enforcement-2021-04-28.json.zip",
             "2023": FIXTURES / "openfda" / "drug-enforcement-2023-08-05-part.json.zip"}


@lru_cache
def _records(snapshot):
    with zipfile.ZipFile(SNAPSHOTS[snapshot]) as archive:
        return {r["recall_number"]: r for r in json.loads(archive.read(archive.namelist()[0]))["results"]}


def _record(recall_number, snapshot="2021"):
    """The record from that snapshot, else from the other one (some recall numbers are in one only)."""
    other = "2023" if snapshot == "2021" else "2021"
    return _records(snapshot).get(recall_number) or _records(other)[recall_number]


def _scope(recall_number, snapshot="2021"):
    record = _record(recall_number, snapshot)
    return parse_scope(record.get("code_info") or "", record.get("more_code_info") or "")


def test_none_of_these_records_is_in_the_evaluation_split():
    split = json.loads((FIXTURES / "lots_split.json").read_text())
    evaluation = {i.split("#")[1] + "@" + i.split("#")[0][17:21] for e in split["evaluation"] for i in e["ids"]}
    used = {"D-1245-2019", "D-1242-2015", "D-1419-2014", "D-1505-2020", "D-0471-2018", "D-1610-2020", "D-0296-2023",
            "D-0053-2017", "D-0470-2020", "D-0384-2020", "D-0355-2020", "D-1407-2012", "D-197-2013", "D-1176-2017",
            "D-0724-2018", "D-0662-2017", "D-0950-2018", "D-0353-2021", "D-1478-2012", "D-1462-2016", "D-577-2013",
            "D-1365-2016", "D-0587-2020", "D-0580-2020", "D-0251-2017", "D-0293-2019", "D-0431-2015", "D-0874-2023",
            "D-1057-2013", "D-1455-2019", "D-0159-2021", "D-1113-2018", "D-0588-2016", "D-0229-2016", "D-0011-2017",
            "D-0013-2017", "D-225-2013", "D-0321-2018", "D-0208-2017", "D-1599-2020", "D-1833-2015", "D-024-2014",
            "D-814-2013", "D-562-2015", "D-453-2013", "D-391-2014", "D-012-2013", "D-205-2013",
            "D-0291-2021", "D-1349-2019", "D-1426-2014"}
    assert not {n for n in used for e in evaluation if e.startswith(n + "@")}
    assert not [e for e in evaluation if e.startswith("D-1396-2016@2023")]  # only its 2021 text is evaluation


# --- dates are never lots -------------------------------------------------------------------------

@pytest.mark.parametrize("recall_number, snapshot, lots", [
    ("D-1245-2019", "2023", {"S700222": "2019-04-30", "S800233": "2020-02-29"}),        # Exp. Apr 30 2019
    ("D-1505-2020", "2021", {"N14695P": "2020-08", "N14695S": "2020-08", "N15627G": "2020-10"}),  # exp. date 08 2020
    ("D-0293-2019", "2021", {"170626": "2019-06-26", "171214": "2019-12-14"}),          # EXP 1214/2019 (sic)
])
def test_written_dates_become_expiry_never_lots(recall_number, snapshot, lots):
    scope = _scope(recall_number, snapshot)
    found = {e.lot: e.expiry for e in scope.lots}
    assert {lot: found.get(lot) for lot in lots} == lots
    assert not any(ch in lot for lot in found for ch in "/") or recall_number != "D-0293-2019"


def test_glued_expiry_words_and_beyond_use_dates():
    glued = _scope("D-1242-2015")  # "31075DK, 31076DK, EXP01JUL2015; 32345DK, 32368DK, EXP 01AUG2015; ..."
    assert {e.lot: e.expiry for e in glued.lots}["31076DK"] == "2015-07-01"
    assert not [lot for lot in glued.lot_numbers if "JUL" in lot or "EXP" in lot]
    bud = _scope("D-1419-2014")  # "04092014@16 / BUD06/08/14; 04142014@51 / BUD 06-13-14"
    assert {e.lot: e.expiry for e in bud.lots}["0409201416"] == "2014-06-08"
    assert not [lot for lot in bud.lot_numbers if lot.startswith("BUD")]


@pytest.mark.parametrize("recall_number, snapshot", [
    ("D-0471-2018", "2021"),   # MFD: 05.06.2016 EXP: 05.05.2018
    ("D-0296-2023", "2023"),   # Beyond Use Date: December 24-31, 2022
])
def test_manufacture_dates_and_date_ranges_alone_are_no_lots(recall_number, snapshot):
    scope = _scope(recall_number, snapshot)
    assert scope.lots == [] and scope.kind == "all_lots"


def test_an_expiry_range_is_not_a_lot():
    scope = _scope("D-0053-2017")  # "Lot Number: 15112064M, Exp between 07/15/15-10/12/15"
    assert scope.lot_numbers == ["15112064M"] and scope.lots[0].expiry is None


# --- lots without a "lot" keyword -----------------------------------------------------------------

def test_tables_of_letter_codes_and_dates_without_a_keyword():
    scope = _scope("D-0470-2020")  # "RHP 8/19  RLD 12/19  SDE 4/20  SID 9/20"
    assert [(e.lot, e.expiry) for e in scope.lots] == [("RHP", "2019-08"), ("RLD", "2019-12"), ("SDE", "2020-04"),
                                                      ("SID", "2020-09")]


@pytest.mark.parametrize("recall_number, expected", [
    ("D-0384-2020", ["RJK", "SBJ", "SFG", "SHI", "SLB", "TCM", "TDC"]),   # Lot #: RJK 10/19  SBJ 2/20 ...
    # Lot#: RGD, Exp 7/19; RHL, Exp 8/19; ...
    ("D-0355-2020", ["RGD", "RHL", "RHB", "RJF", "RJG", "SAJ", "SAK", "SAL", "SAM", "SBK", "SEH", "TCD"]),
])
def test_short_letter_group_lots(recall_number, expected):
    assert _scope(recall_number).lot_numbers == expected


def test_lots_after_product_name_and_strength():
    scope = _scope("D-1407-2012")  # "Eloxatin¿ (OXALIplatin injection) 50mg vial AE41 02/ 2012 ..."
    assert {"AE41", "CA02B", "AE27", "BL18B", "CB13B", "CD65B"} <= set(scope.lot_numbers)
    assert {e.lot: e.expiry for e in scope.lots}["AE41"] == "2012-02"
    assert not [lot for lot in scope.lot_numbers if "MG" in lot or lot.isdigit()]


def test_every_item_of_an_enumeration_and_no_item_numbers():
    scope = _scope("D-197-2013")  # "a) Good Neighbor, Item Number 163792006:  Lot #s: 534204, ... b) ..."
    assert {"534204", "538468", "540540", "538835", "539431", "540529", "534545", "535307"} <= set(scope.lot_numbers)
    assert not [lot for lot in scope.lot_numbers if lot.startswith("16379")]


def test_lot_paired_with_the_manufacturers_lot_in_parentheses():
    scope = _scope("D-1176-2017")  # "a) B0158730-060816 (Mfg: XI002A6), Exp: 12/2017 ; and b) B0160669-061516 ..."
    assert scope.lot_numbers == ["B0158730-060816", "XI002A6", "B0160669-061516", "XI003A6"]
    assert all(e.expiry == "2017-12" for e in scope.lots)


@pytest.mark.parametrize("recall_number, lot", [
    ("D-0724-2018", "LP/100617"),     # Lots: LP/100617 Discard by 4/4/2018; ...
    ("D-0662-2017", "1626253/1746"),  # Lot #: 1626253/1746. Exp 10/18
])
def test_lots_with_a_prefix_and_a_slash(recall_number, lot):
    assert lot in _scope(recall_number).lot_numbers


def test_compounding_lots_written_as_date_time_and_code_stay_whole():
    scope = _scope("D-0950-2018")  # "Lot #: 4/26/18 0520 22110P, BUD 8/9/2018; 5/14/18 1350 22110P, BUD 8/27/2018."
    assert [(e.lot, e.expiry) for e in scope.lots] == [("4/26/18052022110P", "2018-08-09"),
                                                      ("5/14/18135022110P", "2018-08-27")]


# --- other numbers are never lots; the labeller word stays with the lot ---------------------------

def test_labeller_word_kept_and_serial_number_dropped():
    scope = _scope("D-0353-2021", "2023")  # "Lot #: GATCO 01671, Exp Date 12/30/2024  Serial # 728175421856"
    assert [(e.lot, e.expiry) for e in scope.lots] == [("GATCO01671", "2024-12-30")]


def test_labeller_word_lists():
    assert _scope("D-0431-2015").lot_numbers[:2] == ["VFMA029", "VFMA030"]  # "VFMA 029, VFMA 030, ..."


def test_prescription_numbers_are_not_lots():
    scope = _scope("D-1478-2012")  # "Rx #'s:N0396140  N0408047 ..."
    assert scope.lots == [] and scope.kind == "all_lots"


def test_service_codes_are_not_lots():
    scope = _scope("D-1396-2016", "2023")  # "Service Code 3V8705 , Lot Number 160380161M , Exp. Date 5/8/2016 ; ..."
    assert "160380161M" in scope.lot_numbers and {e.lot: e.expiry for e in scope.lots}["160380161M"] == "2016-05-08"
    assert not {"3V8705", "2K8870", "2C8124"} & set(scope.lot_numbers)


def test_quantities_are_not_lots():
    assert _scope("D-1455-2019").lot_numbers == ["1169752A", "1169753A", "GS017387", "GS017651", "GS017479"]
    assert _scope("D-0159-2021").lot_numbers == ["B870130838"]  # "... Exp Jan 2021          70,200  63,252"


def test_ndc_wildcards_are_not_lots():
    # A form seen in recall texts; no development record writes one, so this one is typed.
    assert parse_scope("Lot # HS05B112A, NDC # 11054-009-XX, Exp 10/2020").lot_numbers == ["HS05B112A"]


# --- scopes that are not a lot list ---------------------------------------------------------------

def test_all_lots_with_an_expiry_window():
    scope = _scope("D-1610-2020")  # "All lots with expiry between 10/2020-07/2023"
    assert (scope.kind, scope.expiry_window, scope.lots) == ("all_lots_window", ("2020-10", "2023-07"), [])


@pytest.mark.parametrize("recall_number, window", [
    ("D-1113-2018", ("2018-07", "2020-06")),        # "All Lots with expiration dates 7/2018 to 6/2020"
    ("D-0208-2017", ("2016-05-22", "2016-08-31")),  # "All lots with Use by Date of 5/22/2016 to 8/31/2016"
    ("D-0011-2017", ("2016-09-20", "2016-10-10")),  # "All unexpired lots;  Expirations dates of .09/20/2016 to ..."
    ("D-1599-2020", ("2020-10", "2023-07")),        # "All lots with expiry between10/2020-07/2023"
    # "All lots remaining within expiry (BUDs between November 15, 2017 and December 16, 2017)."
    ("D-0321-2018", ("2017-11-15", "2017-12-16")),
    ("D-0588-2016", (None, "2015-11-17")),          # "All lots with expiration dates up to 11/17/2015"
    ("D-0229-2016", (None, "2018-06-01")),          # "All lots through Expiration Date 06/01/2018"
])
def test_all_lots_with_an_expiry_window_as_written(recall_number, window):
    scope = _scope(recall_number)
    assert (scope.kind, scope.expiry_window, scope.lots) == ("all_lots_window", window, [])
    assert mentions_all_lots(_record(recall_number)["code_info"])


def test_several_expiry_windows_become_one_that_covers_them_all():
    # "All unexpired lots; a) Expirations dates of 10/03/2016 to 11/06/2016 and b) 09/25/2016 to 10/01/2016"
    assert _scope("D-0013-2017").expiry_window == ("2016-09-25", "2016-11-06")
    # "a) All lots with expiry between 02/12 to 10/15; b) All lots with expiry between 09/11 to 12/13; and c) ..."
    assert _scope("D-225-2013").expiry_window == ("2011-09", "2015-10")


def test_not_expired_is_an_open_expiry_window_and_distributed_before_is_no_window():
    scope = _scope("D-1833-2015")  # "All Lots Not Expired and Distributed Before 8/5/15."
    assert (scope.kind, scope.expiry_window, scope.dispensed_window) == ("all_lots_window", (None, None), None)
    # The firm's distribution date does not bound when a pharmacy dispensed: no window that could drop patients.
    assert _scope("D-024-2014").kind == "all_lots"  # "all codes distributed prior to and including 05/23/2013"
    assert _scope("D-814-2013").kind == "all_lots"  # "all lots currently in the market shipped before June 2013"
    # "All lots repackaged between 01/05/12 to 02/12/15"
    assert _scope("D-562-2015").manufactured_window == ("2012-01-05", "2015-02-12")


def test_unexpired_with_a_stated_exception_stays_every_lot():
    # "All products within their expiration date including those dated 90 days prior to April 19, 2013 (Jan. 2013
    # to April 19, 2013)": an unexpired-when-recalled window would drop the expired packs it names.
    assert _scope("D-453-2013").kind == "all_lots"


def test_all_lots_filled_or_dispensed_in_a_window():
    one = _scope("D-0587-2020")  # "All lots filled 08/26/2019 and dispensed 08/26-29/2019 remaining within expiry."
    assert one.kind == "all_lots_window" and one.dispensed_window == ("2019-08-26", "2019-08-29")
    two = _scope("D-0580-2020")  # "... dispensed on 08/26-29/2019 and 09/27/2019 through 10/03/2019 ..."
    assert two.dispensed_window == ("2019-08-26", "2019-10-03")  # one window over both spans: over-notify


def test_compounded_between_is_a_window_and_listed_lots_are_examples():
    scope = _scope("D-0251-2017")  # "Recall includes all sterile products compounded between 05/17/2016 and ..."
    assert scope.kind == "all_lots_window" and scope.manufactured_window == ("2016-05-17", "2016-11-17")
    assert {e.lot: e.expiry for e in scope.lots}["06092016B"] == "2016-07-24"  # "(0724/2016)"
    assert mentions_all_lots(_record("D-0251-2017")["code_info"])


def test_all_lots_within_expiry_has_an_open_expiry_window():
    scope = parse_scope("All lots within expiry.")  # 613 records of the 2023 snapshot say exactly this
    assert (scope.kind, scope.expiry_window) == ("all_lots_window", (None, None))


def test_manufacture_dates_listed_for_all_product_are_not_lots():
    scope = _scope("D-0874-2023", "2023")  # "All product labelled with Date of Manufacture (DOM): DOM 26MAR2020; ..."
    assert scope.lots == [] and scope.kind == "all_lots"


# --- truncation and re-wrapping ------------------------------------------------------------------

def test_a_code_info_cut_by_openfda_flags_the_cut_lot_and_never_matches_the_fragment():
    record = _record("D-1462-2016")  # code_info is cut at 32,600 characters inside "0223201?:.."
    alone = parse_scope(record["code_info"])  # as if more_code_info had not been delivered
    fragment = record["code_info"].split()[-1]
    assert alone.truncated and alone.uncertain[-1] == fragment  # (the others: lots re-joined at re-wrap seams)
    assert fragment not in alone.lot_numbers


def test_the_continuation_in_more_code_info_rejoins_the_cut_token():
    record = _record("D-1396-2016", "2023")  # code_info ends "Service Code 2K8", more_code_info starts "870 , Lot ..."
    assert record["code_info"].endswith("2K8") and record["more_code_info"].startswith("870")
    scope = parse_scope(record["code_info"], record["more_code_info"])
    assert scope.truncated and "2K8" not in scope.lot_numbers and "870" not in scope.lot_numbers
    assert "160950031C" in scope.lot_numbers  # the first lot of more_code_info


def test_a_lot_split_by_the_4000_character_rewrap_is_joined_and_flagged():
    record = _record("D-577-2013")  # 2021 text: "... 10107 747 3/31/20..." at character ~4,000
    assert "10107 747" in record["code_info"]
    scope = parse_scope(record["code_info"])
    assert "10107747" in scope.lot_numbers and "10107747" in scope.uncertain
    assert "10107" not in scope.lot_numbers and "747" not in scope.lot_numbers
    words = parse_scope(_record("D-1365-2016")["code_info"])  # "Lot Numb er 16047003..." keeps reading lots
    assert not [lot for lot in words.lot_numbers if lot in ("ER", "NUMB")]


def _cpu_seconds_to_parse(entries, count):
    text = "  ".join(entries[n % len(entries)].replace("Lot Number ", f"Lot Number {n:04d}") + " ;"
                     for n in range(count))
    start = time.process_time()
    scope = parse_scope(text)
    elapsed = time.process_time() - start
    assert len(scope.lots) == count
    return elapsed


def test_parsing_scales_linearly_with_the_number_of_lots():
    """3,000 lots must cost about ten times 300, not a hundred times (a quadratic scan would).

    A ratio measured in the same run, not an absolute time: CI machines are shared and noisy;
    bench/lots_parse.py reports the absolute figure."""
    record = _record("D-1396-2016", "2023")
    entries = [e.strip() for e in record["code_info"].split(";") if "Lot Number" in e][:-1]
    small = min(_cpu_seconds_to_parse(entries, 300) for _ in range(3))
    large = min(_cpu_seconds_to_parse(entries, 3000) for _ in range(2))
    assert large / max(small, 1e-4) < 35, (small, large)


# --- the stored shape -----------------------------------------------------------------------------

def test_lot_facts_carry_only_their_own_lot_and_scope_terms_ignore_plain_scopes():
    scope = _scope("D-1176-2017")
    attribute = scope.as_attribute()
    own = attribute.for_lot("XI003A6")
    assert own["lots"] == [{"lot": "XI003A6", "expiry": "2017-12"}] and own["kind"] == "lots"
    assert scope_terms(own) is None and scope_terms(attribute) is None  # a plain lot list: nothing to re-version
    window = parse_scope("All lots with expiry between 10/2020-07/2023").as_attribute()
    assert scope_terms(window) == {"expiry_window": ["2020-10", "2023-07"], "kind": "all_lots_window"}
    assert json.loads(json.dumps(attribute)) == dict(attribute)
    assert stored_scope({}, "ABC1")["lots"] == [{"lot": "ABC1", "expiry": None}]  # a fact from before lot_scope


def test_thin_wrappers_keep_their_meaning():
    assert extract_lots("Lot #: RJK 10/19  SBJ 2/20") == ["RJK", "SBJ"]
    assert mentions_all_lots("All lots distributed between November 2014 and May 2015")
    assert not mentions_all_lots("Lot # B70130 Exp. 03/15")


# --- ranges written with a hyphen ------------------------------------------------------------------

def test_lot_ranges_joined_by_a_hyphen_are_read_whole():
    """D-391-2014: "022212001- 022212008, 022212010-022212012, ... 022212012-022212016": every lot of each
    range (a holder of 022212004 was told safe); the unspaced form is also kept as written, in case it is
    one lot. A hyphen inside one lot ("22165-003", "4L67-C035") is no range."""
    lots = set(_scope("D-391-2014").lot_numbers)
    assert {f"0222120{n:02d}" for n in [*range(1, 9), *range(10, 17)]} <= lots
    assert "022212010-022212012" in lots
    assert parse_scope("Lot 22165-003").lot_numbers == ["22165-003"]
    assert parse_scope("Lot 4L67-C035").lot_numbers == ["4L67-C035"]
    assert parse_scope("Lot 2020-2021").lot_numbers == ["2020-2021"]


# --- a lot written with something glued to it ------------------------------------------------------

def test_a_kits_lot_pair_is_read_as_each_of_its_lots_too():
    """D-012-2013 (Class I BiCNU): "Kit/Vial Lot #: (9L7003A/1803607), Exp 11/12": the vial prints one code
    and the kit the other, so a holder of either is a holder of a recalled lot; the pair stays as written. A
    strength ("@14/1.25") or a date ("Date12/2022") after a slash is no pair."""
    scope = _scope("D-012-2013")
    assert {"9L7003A", "1803607", "9L7003A/1803607"} <= set(scope.lot_numbers)
    expiry = {lot.lot: lot.expiry for lot in scope.lots}
    assert expiry["9L7003A"] == expiry["1803607"] == expiry["9L7003A/1803607"] == "2012-11"
    # "401537AA/401537/A": the carton lot and the blister lot
    assert {"401536AA", "401536A", "401537AA", "401537A"} <= set(_scope("D-205-2013").lot_numbers)
    assert parse_scope("Lot 3069020/052019").lot_numbers == ["3069020/052019", "3069020"]  # a date is no pair's lot
    assert "125" not in {re.sub(r"[^A-Z0-9]", "", lot) for lot in parse_scope("Lot #: 20140903@14/1.25").lot_numbers}
    assert not {"DATE12", "2022"} & set(parse_scope("Lot 16257, 16258, Exp. Date12/2022").lot_numbers)


def test_an_expiry_glued_to_a_lot_is_no_part_of_it():
    """"T000651exp 3/2022" (D-0291-2021), "18J003Exp. 09/2020" (D-1349-2019), "0804.182B-1:07/14" (D-1426-2014):
    the lot, not the lot with "EXP" or its expiry (a holder of T000651 was told safe)."""
    assert "T000651" in _scope("D-0291-2021").lot_numbers
    assert not [lot for lot in _scope("D-0291-2021").lot_numbers if "EXP" in lot]
    assert "18J003" in _scope("D-1349-2019").lot_numbers
    lots = _scope("D-1426-2014").lot_numbers
    assert "0804.182B-1" in lots and not [lot for lot in lots if lot.endswith(("/14", "/15"))]
    assert parse_scope("Lot 0EXP").lot_numbers == []
