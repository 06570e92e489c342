"""Patients and dispensing: normalisation on real openFDA formats, validation that explains itself."""

import json
import re
import zipfile
from datetime import UTC, date, datetime, timedelta
from functools import cache

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from drugs.lots import printed_lot
from drugs.ndc import normalize_ndc
from patients.forms import DispensingRecordForm, PatientForm
from patients.models import DispensingRecord, Patient
from tests.factories import make_patient
from tests.paths import OPENFDA

FIXTURE = OPENFDA / "drug-enforcement-2021-04-28.json.zip"


@cache
def recalls_2021() -> dict:
    with zipfile.ZipFile(FIXTURE) as archive:
        results = json.loads(archive.read(archive.namelist()[0]))["results"]
    return {r["recall_number"]: r for r in results}


def ndcs_in_description(recall_number):
    return re.findall(r"NDC:?\s*([\d-]+\d)", recalls_2021()[recall_number]["product_description"])


# --- NDC and lot normalisation on real formats ------------------------------------------------------


@pytest.mark.parametrize("recall_number, printed, expected", [
    ("D-0326-2019", "0378-5814-77", "00378-5814-77"),   # 4-4-2 (Mylan valsartan)
    ("D-0267-2019", "69367-119-01", "69367-0119-01"),   # 5-3-2 (ScieGen irbesartan)
    ("D-1109-2018", "54569-6582-0", "54569-6582-00"),   # 5-4-1 (A-S Medication valsartan)
])
def test_it_normalises_ndcs_as_printed_in_real_recalls(recall_number, printed, expected):
    assert printed in ndcs_in_description(recall_number)
    assert normalize_ndc(printed) == expected


def test_every_hyphenated_package_ndc_in_the_2021_file_becomes_11_digits():
    package_ndcs = {p for r in recalls_2021().values() for p in r.get("openfda", {}).get("package_ndc", [])}
    hyphenated = [p for p in package_ndcs if "-" in p]
    assert len(hyphenated) > 5000
    for raw in hyphenated:
        normalised = normalize_ndc(raw)
        assert re.fullmatch(r"\d{5}-\d{4}-\d{2}", normalised), raw
        # Only zero padding in front of a segment: the labeler, product and package codes are kept.
        for printed, padded in zip(raw.split("-"), normalised.split("-"), strict=True):
            assert padded.endswith(printed) and set(padded[: len(padded) - len(printed)]) <= {"0"}, raw


def test_a_bare_10_digit_ndc_from_the_real_file_is_refused_as_ambiguous():
    bare = [p for r in recalls_2021().values() for p in r.get("openfda", {}).get("package_ndc", [])
            if p.isdigit() and len(p) == 10]
    assert bare, "the 2021 file has bare 10-digit package NDCs"
    with pytest.raises(ValueError, match="4-4-2, 5-3-2 or 5-4-1"):
        normalize_ndc(bare[0])


@pytest.mark.parametrize("recall_number, printed, expected", [
    ("D-0315-2019", "Lot # 3061169", "3061169"),
    ("D-0368-2019", "Lot # HVSA17011-A", "HVSA17011-A"),   # hyphen inside the lot is kept
    ("D-1135-2018", "Batch: BV47C005", "BV47C005"),
    ("D-1003-2019", "Lot #: BTL703A", "BTL703A"),
])
def test_it_normalises_lots_as_printed_in_real_recalls(recall_number, printed, expected):
    assert printed in recalls_2021()[recall_number]["code_info"]
    assert printed_lot(printed) == expected


@pytest.mark.django_db
def test_a_dispensing_row_stores_drug_lot_and_ndc_in_the_recall_forms():
    patient = make_patient("P-1")
    row = DispensingRecord.objects.create(
        patient=patient, drug="VALSARTAN Tablets, USP 160 mg", lot=" lot # hvsa17011-a ", ndc="0378-5814-77",
        quantity=90, dispensed_at=timezone.now())
    row.refresh_from_db()
    assert (row.drug, row.lot, row.ndc, row.region) == ("valsartan", "HVSA17011A", "00378-5814-77", "aws-us-east-1")


# --- Patients -----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_patient_without_a_region_is_refused_with_a_clear_error():
    with pytest.raises(ValidationError, match="needs a home region"):
        Patient.objects.create(external_ref="P-0", display_name="No region", email="a@example.com")
    with pytest.raises(ValidationError, match="Unknown region 'mars-1'"):
        Patient.objects.create(external_ref="P-0", display_name="Bad region", region="mars-1")
    assert not Patient.objects.exists()
    form = PatientForm(data={"display_name": "X", "external_ref": "P-9", "region": "", "preferred_channel": "email",
                             "email": "x@example.com"})
    assert not form.is_valid()
    assert "needs a home region" in form.errors["region"][0]


@pytest.mark.django_db
def test_the_preferred_channel_needs_its_contact_detail():
    form = PatientForm(data={"display_name": "X", "external_ref": "P-9", "region": "aws-eu-west-1",
                             "preferred_channel": "sms", "email": "x@example.com"})
    assert not form.is_valid()
    assert form.errors["phone"] == ["Preferred channel is SMS, so a phone number is required."]


@pytest.mark.django_db
def test_moving_a_patient_moves_their_dispensing_rows():
    patient = make_patient("P-1")
    DispensingRecord.objects.create(patient=patient, drug="valsartan", lot="A1", quantity=1,
                                    dispensed_at=timezone.now())
    patient.region = "aws-eu-west-1"
    patient.save()
    assert list(DispensingRecord.objects.values_list("region", flat=True)) == ["aws-eu-west-1"]


# --- Dispensing validation (the admin form) ---------------------------------------------------------------


def dispensing_form(patient, **overrides):
    data = {"patient": patient.pk, "drug": "Valsartan", "product_description": "", "ndc": "0378-5814-77",
            "lot": "3069020", "expiry": "", "quantity": "90", "dispensed_at": "2019-01-02 10:00:00", "site": ""}
    data.update(overrides)
    return DispensingRecordForm(data=data)


@pytest.mark.django_db
def test_the_dispensing_form_accepts_a_good_row_and_normalises_it():
    patient = make_patient("P-1")
    form = dispensing_form(patient, lot="Lot # 3069020", drug="", product_description="Valsartan Tablets USP 160 mg")
    assert form.is_valid(), form.errors
    row = form.save()
    assert (row.drug, row.lot, row.ndc, row.region) == ("valsartan", "3069020", "00378-5814-77", "aws-us-east-1")


@pytest.mark.django_db
@pytest.mark.parametrize("overrides, field, message", [
    ({"ndc": "12345-678"}, "ndc", "Bad NDC: '12345-678' is not an NDC"),
    ({"ndc": "0378581477"}, "ndc", "expected 10 digits hyphenated"),
    ({"lot": ""}, "lot", "Lot number is missing"),
    ({"lot": "Lot #"}, "lot", "has no letters or digits"),
    ({"drug": "", "product_description": ""}, "drug", "Drug is required"),
    ({"expiry": "2018-12-31"}, "expiry", "before the dispensing date"),
])
def test_the_dispensing_form_explains_what_is_wrong(overrides, field, message):
    form = dispensing_form(make_patient("P-1"), **overrides)
    assert not form.is_valid()
    assert any(message in error for error in form.errors[field]), form.errors


@pytest.mark.django_db
def test_dispensing_in_the_future_is_refused():
    tomorrow = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")
    form = dispensing_form(make_patient("P-1"), dispensed_at=tomorrow)
    assert not form.is_valid()
    assert "Dispensed in the future" in form.errors["dispensed_at"][0]


@pytest.mark.django_db
def test_clean_keeps_region_with_the_patient():
    patient = make_patient("P-1", region="aws-ap-southeast-1")
    row = DispensingRecord(patient=patient, drug="valsartan", lot="a1", quantity=1,
                           dispensed_at=datetime(2019, 1, 1, tzinfo=UTC), expiry=date(2020, 1, 1))
    row.full_clean()
    assert (row.region, row.lot) == ("aws-ap-southeast-1", "A1")
