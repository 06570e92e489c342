"""drugs.ndc.ten_digit_forms: the ten printed digits an NDC-11 may have been read from, so a code typed in
another layout is known for the recall's own (drugs.matching, ADR 0020)."""

import pytest

from drugs.ndc import normalize_ndc, ten_digit_forms

LAYOUTS = {"4-4-2": (4, 4, 2), "5-3-2": (5, 3, 2), "5-4-1": (5, 4, 1)}


def _layout(digits: str, sizes) -> str:
    a, b, _c = sizes
    return f"{digits[:a]}-{digits[a:a + b]}-{digits[a + b:]}"


@pytest.mark.parametrize("printed", ["0378-5814-77", "51285-061-01", "55111-123-90", "63629-7797-1"])
def test_every_layout_of_the_same_ten_digits_shares_a_form(printed):
    digits = printed.replace("-", "")
    readings = [normalize_ndc(_layout(digits, sizes)) for sizes in LAYOUTS.values()]
    assert len(set(readings)) == 3  # three different NDC-11s ...
    for reading in readings:
        assert digits in ten_digit_forms(reading)  # ... each read from the same printed digits


def test_different_digits_share_no_form_and_a_malformed_code_has_none():
    assert not ten_digit_forms("00378-5814-77") & ten_digit_forms("00378-5815-77")
    assert ten_digit_forms("12345-6789-12") == set()  # no padding zero: an 11-digit code as printed
    assert ten_digit_forms("0378-5814-77") == ten_digit_forms("") == set()
