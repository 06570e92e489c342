"""drugs.gs1's EPC identifiers on GS1's own published examples (EPC Tag Data Standard, GS1 Digital Link), the
Digital Link rules biip holds it to, and the same unit read alike from a URN and a Digital Link."""

import random

import pytest

from drugs.gs1 import epc_refusal, gtin_for_ndc, is_case, lgtin, sgtin, sgtin_pattern, sgtin_uri

# EPC Tag Data Standard examples: (URI, what it names).
TDS_UNITS = [
    ("urn:epc:id:sgtin:0614141.112345.400", ("10614141123459", "400")),
    ("urn:epc:id:sgtin:0614141.712345.32a%2Fb", ("70614141123451", "32a/b")),  # a '/' escaped in the serial
    ("urn:epc:id:sgtin:0614141.812345.6789", ("80614141123458", "6789")),
]
TDS_LOTS = [("urn:epc:class:lgtin:4012345.012345.998877", ("04012345123456", "998877"))]
TDS_CASES = ["urn:epc:id:sscc:0614141.1234567890"]
TDS_PATTERNS = [("urn:epc:idpat:sgtin:0614141.112345.*", "10614141123459")]
# GS1 Digital Link standard examples (any host, a path before the key, key qualifiers, a query not read).
DIGITAL_LINK_UNITS = [
    ("https://id.gs1.org/01/09520123456788/21/12345", ("09520123456788", "12345")),
    ("https://id.gs1.org/01/09520123456788/10/ABC1/21/12345", ("09520123456788", "12345")),
    ("https://example.com/01/09520123456788/22/2A/10/ABC123/21/456?17=180426", ("09520123456788", "456")),
    ("https://brand.example.com/some/path/01/09520123456788/21/12345#label", ("09520123456788", "12345")),
    ("https://id.gs1.org/01/9520123456788/21/12345", ("09520123456788", "12345")),  # a GTIN-13, as 14 digits
]
DIGITAL_LINK_LOTS = [("https://id.gs1.org/01/09520123456788/10/ABC123", ("09520123456788", "ABC123"))]
DIGITAL_LINK_CASES = ["https://id.gs1.org/00/106141412345678908"]


@pytest.mark.parametrize(("uri", "named"), TDS_UNITS + DIGITAL_LINK_UNITS)
def test_a_unit_in_gs1s_examples(uri, named):
    assert sgtin(uri) == named and epc_refusal(uri) == "" and not is_case(uri) and lgtin(uri) is None


@pytest.mark.parametrize(("uri", "named"), TDS_LOTS + DIGITAL_LINK_LOTS)
def test_a_lot_in_gs1s_examples(uri, named):
    assert lgtin(uri) == named and sgtin(uri) is None and sgtin_pattern(uri) == named[0]


@pytest.mark.parametrize("uri", TDS_CASES + DIGITAL_LINK_CASES)
def test_a_case_in_gs1s_examples(uri):
    assert is_case(uri) and epc_refusal(uri) == "" and sgtin(uri) is None


@pytest.mark.parametrize(("uri", "gtin"), TDS_PATTERNS)
def test_a_product_class_in_gs1s_examples(uri, gtin):
    assert sgtin_pattern(uri) == gtin and sgtin(uri) is None


@pytest.mark.parametrize("uri", [
    "urn:epc:id:sgtin:0614141.11234.400",                     # 12 digits of company prefix and item reference
    "urn:epc:id:sgtin:0614141.112345." + "9" * 21,            # a serial over 20 characters
    "https://id.gs1.org/01/09520123456781/21/12345",          # a wrong check digit
    "https://id.gs1.org/01/09520123456788/21/12345/10/ABC1",  # qualifiers out of GS1's order
    "https://id.gs1.org/01/09520123456788/17/261231",         # an expiry is no key qualifier
    "https://id.gs1.org/01/09520123456788/21/" + "X" * 21,    # a serial over 20 characters
    "https://id.gs1.org/00/106141412345678901",               # an SSCC with a wrong check digit
    "https://id.gs1.org/414/0614141000005",                   # a location, not a unit or a case
    "urn:epc:id:sgln:0614141.12345.400",
    "",
])
def test_what_is_neither_a_unit_nor_a_case_is_refused_with_a_reason(uri):
    assert sgtin(uri) is None and not is_case(uri) and epc_refusal(uri)


def test_an_overlong_serial_is_refused_in_the_same_words_in_every_form():
    serial = "X" * 21
    urn = sgtin_uri(gtin_for_ndc("13668-409-30"), serial)
    link = f"https://id.gs1.org/01/{gtin_for_ndc('13668-409-30')}/21/{serial}"
    assert epc_refusal(urn) == epc_refusal(link) and "longer than GS1's 20 characters" in epc_refusal(urn)


def test_every_unit_reads_the_same_from_its_urn_and_its_digital_link():
    rng = random.Random(11)
    for _ in range(500):
        ndc = f"{rng.randrange(10000, 99999)}-{rng.randrange(100, 999)}-{rng.randrange(10, 99)}"
        gtin = gtin_for_ndc(ndc, indicator=str(rng.randrange(10)))
        serial = "".join(rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", k=rng.randint(1, 20)))
        assert sgtin(sgtin_uri(gtin, serial)) == (gtin, serial)
        assert sgtin(f"https://id.gs1.org/01/{gtin}/21/{serial}") == (gtin, serial)
