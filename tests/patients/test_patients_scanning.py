"""Lot capture by scanning, in the admin dispensing form, the patient form's inline rows and the CSV
`scan` column; the NDC resolved against known products or asked for; 'lot unknown' recorded as such.

Real packs and recalls: Mylan valsartan 0378-5814-77 lot 3069020 (D-0326-2019, Class II, Ongoing),
Preferred Pharmaceuticals losartan 68788-0048-03 lot A1818G (D-1281-2019). Patients are synthetic.
"""

import re
from datetime import UTC, date, datetime

import pytest
from django.contrib.messages import get_messages
from django.db import IntegrityError, transaction

from drugs.gs1 import gtin_for_ndc, ndc_candidates
from memory.fact_writes import assert_claim
from patients.csvimport import import_dispensing_csv
from patients.models import DispensingRecord
from patients.scanning import known_products
from tests.factories import openfda_record, recall_claim

GS = "\x1d"
VALSARTAN_GTIN, LOSARTAN_GTIN, TEVA_GTIN = "00303785814771", "00368788048035", "00300937367567"
VALSARTAN_SCAN = f"]d2 01{VALSARTAN_GTIN} 17210531 103069020{GS} 21SN100000012345".replace(" ", "")
LOSARTAN_SCAN = f"]d2 01{LOSARTAN_GTIN} 17200331 10A1818G{GS} 21SN2".replace(" ", "")


def add_form(patient, **fields):
    data = {"patient": patient.pk, "scan": "", "drug": "", "product_description": "", "ndc": "", "lot": "",
            "expiry": "", "serial": "", "quantity": "90", "dispensed_at_0": "2019-03-01", "dispensed_at_1": "10:00:00",
            "site": ""}
    data.update(fields)
    return data


def page_errors(response) -> str:
    form = response.context["adminform"].form
    return " | ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())


def losartan_claim():
    """D-1281-2019 has no openfda block: ingestion takes its NDCs from what its product description prints."""
    claim = recall_claim("D-1281-2019", "A1818G")
    printed = re.findall(r"NDC (\d{5}-\d{4}-\d{2})", openfda_record("D-1281-2019")["product_description"])
    assert printed == ["68788-0048-03", "68788-0048-09"] and claim.attributes["ndcs"] == printed
    return claim


# --- Admin dispensing form --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_scan_in_the_admin_form_fills_ndc_lot_expiry_and_serial_and_warns_of_the_recall(
        admin_client, patient, hashing_embeddings):
    assert_claim(recall_claim("D-0326-2019", "3069020"))  # names 00378-5814-77 among its NDCs
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, scan=VALSARTAN_SCAN, drug="Valsartan"), follow=True)
    assert response.status_code == 200
    row = DispensingRecord.objects.get()
    assert (row.ndc, row.lot, row.expiry, row.serial, row.gtin, row.lot_unknown) == (
        "00378-5814-77", "3069020", date(2021, 5, 31), "SN100000012345", "00303785814771", False)
    warnings = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("under an active recall" in m and "D-0326-2019" in m for m in warnings), warnings


@pytest.mark.django_db(transaction=True)
def test_a_recall_naming_the_product_in_its_description_resolves_the_gtin(admin_client, patient, hashing_embeddings):
    assert_claim(losartan_claim())
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, scan=LOSARTAN_SCAN, drug="Losartan Potassium 50 mg tablets",
                                          dispensed_at_0="2019-01-10"))
    assert response.status_code == 302, page_errors(response)
    row = DispensingRecord.objects.get()
    assert (row.ndc, row.lot, row.expiry, row.serial) == ("68788-0048-03", "A1818G", date(2020, 3, 31), "SN2")


def test_an_unknown_product_is_asked_for_and_the_typed_ndc_settles_it(admin_client, patient):
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, scan=LOSARTAN_SCAN, drug="losartan", dispensed_at_0="2019-01-10"))
    assert response.status_code == 200 and not DispensingRecord.objects.exists()
    errors = page_errors(response)
    assert "ndc: The scanned GTIN 00368788048035 is one of the NDCs 6878-8048-03 (4-4-2), 68788-048-03 (5-3-2), " \
           "68788-0480-3 (5-4-1)" in errors
    assert "none of them is a product we know yet" in errors and "Type the NDC printed on the pack" in errors
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, scan=LOSARTAN_SCAN, drug="losartan", ndc="68788-048-03",
                                          dispensed_at_0="2019-01-10"))
    assert response.status_code == 302, page_errors(response)
    assert DispensingRecord.objects.get().ndc == "68788-0048-03"


def test_a_product_already_dispensed_resolves_the_gtin(admin_client, patient):
    DispensingRecord.objects.create(patient=patient, drug="some drug", lot="T1", ndc="0093-7367-56", quantity=1,
                                    dispensed_at=datetime(2019, 1, 1, tzinfo=UTC))
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, scan=f"01{TEVA_GTIN}17270500|10ABC1234", drug="some drug"))
    assert response.status_code == 302, page_errors(response)
    assert DispensingRecord.objects.get(lot="ABC1234").ndc == "00093-7367-56"


def test_two_known_products_for_one_gtin_are_asked_for(admin_client, patient):
    for lot, ndc in (("T1", "0093-7367-56"), ("T2", "00937-367-56")):
        DispensingRecord.objects.create(patient=patient, drug="some drug", lot=lot, ndc=ndc, quantity=1,
                                        dispensed_at=datetime(2019, 1, 1, tzinfo=UTC))
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, scan=f"01{TEVA_GTIN}10ABC1234", drug="some drug"))
    assert "2 of them are products we know" in page_errors(response)


@pytest.mark.parametrize("typed, message", [
    ({"ndc": "0378-5814-77"}, "ndc: The typed NDC 0378-5814-77 is not the scanned package"),
    ({"ndc": "68788-048-03", "lot": "A1818H"}, "lot: The scan reads lot A1818G but A1818H was typed"),
    ({"ndc": "68788-048-03", "expiry": "2020-04-30"}, "expiry: The scan reads expiry 2020-03-31"),
    ({"ndc": "68788-048-03", "lot_unknown": "on"}, "lot_unknown: The scan reads lot A1818G"),
    ({"scan": f"01{LOSARTAN_GTIN}1720033110A1818G21SN2"}, "scan: The scan has no group separator"),
    ({"scan": "0100368788048036"}, "scan: The GTIN in the scan is wrong"),
])
def test_what_disagrees_with_the_scan_is_reported_on_its_field(admin_client, patient, typed, message):
    fields = {"scan": LOSARTAN_SCAN, "drug": "losartan", "dispensed_at_0": "2019-01-10", **typed}
    response = admin_client.post("/admin/patients/dispensingrecord/add/", add_form(patient, **fields))
    assert response.status_code == 200 and message in page_errors(response)
    assert not DispensingRecord.objects.exists()


def test_typed_values_that_agree_with_the_scan_are_accepted(admin_client, patient):
    response = admin_client.post("/admin/patients/dispensingrecord/add/", add_form(
        patient, scan=LOSARTAN_SCAN, drug="losartan", ndc="68788-048-03", lot="lot # a1818g", expiry="2020-03-31",
        dispensed_at_0="2019-01-10"))
    assert response.status_code == 302, page_errors(response)
    assert DispensingRecord.objects.get().lot == "A1818G"


# --- Inline rows on the patient form ------------------------------------------------------------------------


def inline_data(patient, rows, existing=()):
    data = {"display_name": patient.display_name, "external_ref": patient.external_ref, "region": patient.region,
            "preferred_channel": patient.preferred_channel, "email": patient.email, "phone": patient.phone,
            "dispensings-TOTAL_FORMS": str(len(existing) + len(rows)),
            "dispensings-INITIAL_FORMS": str(len(existing)), "dispensings-MIN_NUM_FORMS": "0",
            "dispensings-MAX_NUM_FORMS": "1000"}
    for i, row in enumerate([*existing, *rows]):
        values = {"scan": "", "drug": "", "product_description": "", "ndc": "", "lot": "", "expiry": "",
                  "serial": "", "quantity": "30", "dispensed_at_0": "2019-03-01", "dispensed_at_1": "10:00:00",
                  "site": "", "patient": str(patient.pk)}
        values.update(row)
        data.update({f"dispensings-{i}-{k}": v for k, v in values.items() if v is not None})
    return data


@pytest.mark.django_db(transaction=True)
def test_an_inline_row_takes_a_scan_and_warns_of_the_recall_as_the_dispensing_form_does(
        admin_client, patient, hashing_embeddings):
    assert_claim(recall_claim("D-0326-2019", "3069020"))
    response = admin_client.post(f"/admin/patients/patient/{patient.pk}/change/",
                                 inline_data(patient, [{"scan": VALSARTAN_SCAN, "drug": "Valsartan"}]), follow=True)
    assert response.status_code == 200
    row = DispensingRecord.objects.get()
    assert (row.ndc, row.lot, row.serial, row.expiry) == ("00378-5814-77", "3069020", "SN100000012345",
                                                          date(2021, 5, 31))
    warnings = [str(m) for m in get_messages(response.wsgi_request)]
    assert any(m.startswith("Saved, but this dispensing is under an active recall") and "D-0326-2019" in m
               for m in warnings), warnings


def test_an_inline_scan_that_needs_the_ndc_shows_the_question_on_the_row(admin_client, patient):
    response = admin_client.post(f"/admin/patients/patient/{patient.pk}/change/",
                                 inline_data(patient, [{"scan": LOSARTAN_SCAN, "drug": "losartan"}]))
    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    assert "Type the NDC printed on the pack" in " ".join(formset.forms[0].errors["ndc"])
    assert not DispensingRecord.objects.exists()


# --- CSV scan column ------------------------------------------------------------------------------------------


def test_the_csv_scan_column_fills_the_row_and_reports_what_disagrees(patient):
    header = "patient_ref,drug,ndc,lot,scan,quantity,dispensed_at\n"
    good = f"P-1,losartan,68788-048-03,,{LOSARTAN_SCAN.replace(GS, '|')},30,2019-01-10\n"
    bad_lot = f"P-1,losartan,68788-048-03,B1,{LOSARTAN_SCAN},30,2019-01-11\n"
    unknown_product = f"P-1,losartan,,,{LOSARTAN_SCAN},30,2019-01-12\n"
    result = import_dispensing_csv(header + good + bad_lot + unknown_product)
    assert [(e.row, e.reason[:40]) for e in result.errors] == [
        (3, "lot: The scan reads lot A1818G but B1 wa"), (4, "ndc: The scanned GTIN 00368788048035 is ")]
    result = import_dispensing_csv(header + good)
    assert result.ok, result.errors
    row = DispensingRecord.objects.get()
    assert (row.ndc, row.lot, row.expiry, row.serial, row.gtin) == ("68788-0048-03", "A1818G", date(2020, 3, 31),
                                                                    "SN2", "00368788048035")


# --- Lot unknown ------------------------------------------------------------------------------------------------


def test_lot_unknown_is_recorded_explicitly_and_shown_as_unknown(admin_client, patient):
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, drug="valsartan", lot_unknown="on"))
    assert response.status_code == 302, page_errors(response)
    row = DispensingRecord.objects.get()
    assert (row.lot, row.lot_unknown) == ("", True)
    assert "lot unknown for patient P-1" in str(row)
    listing = admin_client.get("/admin/patients/dispensingrecord/").content.decode()
    assert "unknown (not recorded)" in listing
    found = admin_client.get("/admin/patients/dispensingrecord/?q=unknown")
    assert list(found.context["cl"].result_list) == [row]


@pytest.mark.parametrize("fields, message", [
    ({"lot": ""}, "if it really cannot be known, tick 'lot unknown'"),
    ({"lot": "N/A"}, "'N/A' is not a lot number. If the lot cannot be known, tick 'lot unknown'"),
    ({"lot": "unknown"}, "'unknown' is not a lot number"),
    ({"lot": "3069020", "lot_unknown": "on"}, "Lot 3069020 is given and 'lot unknown' is ticked"),
])
def test_an_empty_or_placeholder_lot_is_refused_unless_marked_unknown(admin_client, patient, fields, message):
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, drug="valsartan", **fields))
    assert response.status_code == 200 and message in page_errors(response)


def test_the_database_refuses_an_empty_lot_not_marked_unknown(patient):
    when = datetime(2019, 1, 1, tzinfo=UTC)
    with pytest.raises(IntegrityError), transaction.atomic():
        DispensingRecord.objects.create(patient=patient, drug="valsartan", lot="", quantity=1, dispensed_at=when)
    with pytest.raises(IntegrityError), transaction.atomic():
        DispensingRecord.objects.create(patient=patient, drug="valsartan", lot="A1", lot_unknown=True, quantity=1,
                                        dispensed_at=when)


def test_the_csv_lot_unknown_column(patient):
    header = "patient_ref,drug,lot,lot_unknown,quantity,dispensed_at\n"
    result = import_dispensing_csv(header + "P-1,valsartan,,yes,30,2019-01-10\nP-1,valsartan,,,30,2019-01-11\n"
                                   "P-1,valsartan,,perhaps,30,2019-01-12\nP-1,valsartan,NA,no,30,2019-01-13\n")
    assert [(e.row, e.reason[:45]) for e in result.errors] == [
        (3, "lot: Lot number is missing: recalls are match"),
        (4, "lot_unknown 'perhaps' is not yes or no."),
        (5, "lot: 'NA' is not a lot number. If the lot can"),
    ]
    assert import_dispensing_csv(header + "P-1,valsartan,,yes,30,2019-01-10\n").ok
    assert DispensingRecord.objects.get().lot_unknown


def test_correcting_the_ndc_by_hand_drops_the_stored_gtin(admin_client, patient):
    admin_client.post("/admin/patients/dispensingrecord/add/", add_form(
        patient, scan=LOSARTAN_SCAN, drug="losartan", ndc="68788-048-03", dispensed_at_0="2019-01-10"))
    row = DispensingRecord.objects.get()
    assert row.gtin == LOSARTAN_GTIN
    response = admin_client.post(f"/admin/patients/dispensingrecord/{row.pk}/change/", add_form(
        patient, drug="losartan", ndc="68788-0048-09", lot="A1818G", expiry="2020-03-31", serial="SN2",
        dispensed_at_0="2019-01-10"))
    assert response.status_code == 302, page_errors(response)
    row.refresh_from_db()
    assert (row.ndc, row.gtin) == ("68788-0048-09", "")


@pytest.mark.django_db(transaction=True)
def test_known_products_by_scope_for_this_lot_and_by_attributes_for_another(hashing_embeddings):
    assert_claim(recall_claim("D-0326-2019", "3069020"))
    valsartan = ndc_candidates(gtin_for_ndc("0378-5814-77"))
    assert known_products(valsartan, "3069020") == {"00378-5814"}   # the fact's scope names this lot
    assert known_products(valsartan, "X1") == {"00378-5814"}        # the fact's attributes name the product
    assert known_products(ndc_candidates(gtin_for_ndc("0093-7367-56")), "X1") == set()
