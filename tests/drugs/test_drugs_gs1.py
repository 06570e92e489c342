"""Reading the GS1 DataMatrix of a US prescription pack (drugs.gs1): GTIN, expiry, lot, serial.

The packs are real: Mylan valsartan 160 mg, NDC 0378-5814-77, lot 3069020 (recall D-0326-2019);
Preferred Pharmaceuticals losartan 50 mg, NDC 68788-0048-03 as the recall prints it, lot A1818G
(recall D-1281-2019); Teva 0093-7367-56 (biip's own example). Their GTINs are computed from the NDC
as GS1 US does ('03' + NDC-10 + check digit). Serial numbers are synthetic.
"""

import json
import zipfile
from datetime import date

import pytest

from drugs.gs1 import ScanError, gtin_for_ndc, ndc_candidates, parse_scan
from drugs.ndc import normalize_ndc
from tests.paths import OPENFDA

GS = "\x1d"
VALSARTAN_GTIN = "00303785814771"   # NDC 0378-5814-77
LOSARTAN_GTIN = "00368788048035"    # NDC 68788-048-03 = 68788-0048-03
TEVA_GTIN = "00300937367567"        # NDC 0093-7367-56


def test_the_gtins_are_the_ones_gs1_us_assigns_to_those_ndcs():
    assert gtin_for_ndc("0378-5814-77") == VALSARTAN_GTIN
    assert gtin_for_ndc("68788-048-03") == LOSARTAN_GTIN
    assert gtin_for_ndc("0093-7367-56") == TEVA_GTIN


def test_a_scanner_string_with_group_separator_and_symbology_prefix():
    scan = parse_scan(f"]d201{VALSARTAN_GTIN}17210531103069020{GS}21SN100000012345")
    assert (scan.gtin, scan.expiry, scan.lot, scan.serial) == (VALSARTAN_GTIN, date(2021, 5, 31), "3069020",
                                                               "SN100000012345")
    assert "00378-5814-77" in {c.ndc11 for c in scan.candidates}


def test_without_a_separator_the_lot_may_come_last():
    # Serial first, then the variable-length lot at the end: no separator needed after it.
    scan = parse_scan(f"01{VALSARTAN_GTIN}21SN1{GS}17210500103069020")
    assert (scan.serial, scan.lot) == ("SN1", "3069020")
    scan = parse_scan(f"01{LOSARTAN_GTIN}17200300" + "10A1818G")
    assert (scan.lot, scan.serial, scan.expiry) == ("A1818G", "", date(2020, 3, 31))


def test_without_a_separator_a_lot_that_swallowed_the_serial_is_refused():
    with pytest.raises(ScanError, match="no group separator.*lot.*may include the serial"):
        parse_scan(f"01{VALSARTAN_GTIN}1721053110306902021SN1")
    with pytest.raises(ScanError, match="where the serial ends.*may include the lot"):
        parse_scan(f"01{VALSARTAN_GTIN}1721053121SN110306902")


def test_a_lot_too_long_to_have_an_end_is_refused():
    # 20 characters is the most a lot can hold; without GS the serial runs on past that.
    with pytest.raises(ScanError):
        parse_scan(f"01{VALSARTAN_GTIN}1721053110306902021100000012345")


@pytest.mark.parametrize("separator", ["|", "^", "~", "\u241d", "<GS>", "[GS]", "{GS}", "<FNC1>", "\\x1d"])
def test_the_group_separator_substitutes_scanners_are_set_to_send(separator):
    scan = parse_scan(f"]d201{TEVA_GTIN}1727053110ABC1234{separator}21100000012345")
    assert (scan.lot, scan.serial, scan.expiry) == ("ABC1234", "100000012345", date(2027, 5, 31))


def test_expiry_day_00_is_the_end_of_the_month():
    assert parse_scan(f"01{TEVA_GTIN}17270500").expiry == date(2027, 5, 31)
    assert parse_scan(f"01{TEVA_GTIN}17280200").expiry == date(2028, 2, 29)  # leap year
    assert parse_scan(f"01{TEVA_GTIN}17270200").expiry == date(2027, 2, 28)


def test_expired_packs_are_read_for_looking_back_at_old_fills():
    assert parse_scan(f"01{LOSARTAN_GTIN}1718033110A1818G").expiry == date(2018, 3, 31)


def test_the_printed_human_readable_text_and_spaces_between_fields():
    scan = parse_scan("(01) 00300937367567 (17) 270500 (10) ABC1234 (21) 100000012345")
    assert (scan.gtin, scan.expiry, scan.lot, scan.serial) == (TEVA_GTIN, date(2027, 5, 31), "ABC1234",
                                                               "100000012345")
    spaced = parse_scan(f"]d2 01 {TEVA_GTIN} 17 270531 10 ABC1234 <GS> 21 100000012345")
    assert (spaced.lot, spaced.serial) == ("ABC1234", "100000012345")


def test_a_gs1_digital_link_uri():
    scan = parse_scan(f"https://id.gs1.org/01/{TEVA_GTIN}/10/ABC1234/21/1000?17=270531")
    assert (scan.gtin, scan.lot, scan.serial, scan.expiry) == (TEVA_GTIN, "ABC1234", "1000", date(2027, 5, 31))


def test_a_linear_upc_gives_the_gtin_alone():
    scan = parse_scan("300937367567")
    assert (scan.gtin, scan.lot, scan.expiry) == (TEVA_GTIN, "", None)


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("hello", "not a GS1"),
    ("0100300937367568", "check digit"),            # last digit wrong
    ("(01)0030093736756", "printed barcode text"),  # 13 digits
    (f"01{TEVA_GTIN}17271331", "GS1"),               # month 13
    ("9" * 400, "characters long"),
])
def test_unreadable_scans_are_refused_with_a_reason(text, reason):
    with pytest.raises(ScanError, match=reason):
        parse_scan(text)


def test_a_gtin_stands_for_three_ndcs_one_per_hyphenation():
    assert [(c.printed, c.ndc11, c.layout) for c in ndc_candidates(TEVA_GTIN)] == [
        ("0093-7367-56", "00093-7367-56", "4-4-2"),
        ("00937-367-56", "00937-0367-56", "5-3-2"),
        ("00937-3675-6", "00937-3675-06", "5-4-1"),
    ]
    assert ndc_candidates("04006381333931") == []  # a German GTIN: not built from an NDC


def test_every_hyphenated_package_ndc_of_the_2021_file_round_trips_through_its_gtin():
    path = OPENFDA / "drug-enforcement-2021-04-28.json.zip"
    with zipfile.ZipFile(path) as archive:
        results = json.loads(archive.read(archive.namelist()[0]))["results"]
    # 10-digit NDCs as labelers print them (a few listings already print 11 digits: no GTIN form).
    ndcs = {p for r in results for p in (r.get("openfda") or {}).get("package_ndc", [])
            if "-" in p and len(p.replace("-", "")) == 10}
    assert len(ndcs) > 5000
    for ndc in ndcs:
        gtin = gtin_for_ndc(ndc)
        assert parse_scan(f"01{gtin}").gtin == gtin, ndc  # biip agrees on the check digit
        assert normalize_ndc(ndc) in {c.ndc11 for c in ndc_candidates(gtin)}, ndc
