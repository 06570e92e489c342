"""A pharmacy's drug description and FDA's generic name must meet on one string, or a patient is missed."""

import pytest

from recalls.normalize import normalize_drug_name


@pytest.mark.parametrize("pharmacy, fda", [
    ("Montelukast Sodium Tablets 10 mg", "MONTELUKAST"),
    ("Losartan Tablets USP, 50 mg", "LOSARTAN POTASSIUM"),
    ("Amlodipine 10mg tablet", "AMLODIPINE BESYLATE"),
    ("Valsartan and Hydrochlorothiazide Tablets, USP 160 mg/25 mg", "VALSARTAN AND HYDROCHLOROTHIAZIDE"),
])
def test_salt_and_form_words_do_not_split_one_drug_in_two(pharmacy, fda):
    assert normalize_drug_name(pharmacy) == normalize_drug_name(fda)


@pytest.mark.parametrize("name, expected", [
    ("Magnesium Sulfate in Water for Injection", "magnesium sulfate in water"),
    ("Potassium Chloride Extended-Release Tablets", "potassium chloride"),
    ("Sodium Bicarbonate Injection", "sodium bicarbonate"),
])
def test_salts_that_are_the_drug_itself_are_kept(name, expected):
    assert normalize_drug_name(name) == expected
