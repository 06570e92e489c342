"""A scan at fill resolves a GTIN by what EPCIS receiving recorded for it: the supplier's master data
(EPCClass vocabulary, `urn:epcglobal:cbv:mda#additionalTradeItemIdentification`) names the NDC, the shelf keeps
it on the units received, and patients.scanning reads it through the shelf's registered reader
(GTIN_NDC_SOURCES; patients never imports shelf).

The EPCIS documents are tests/epcis_docs.py's synthetic shipments around the real recalled losartan 50 mg pack
(NDC 13668-409-30, GTIN 00313668409307, D-0502-2019); the patient is synthetic.
"""

from datetime import UTC, date, datetime

from drugs.gs1 import ndc_candidates
from patients.csvimport import import_dispensing_csv
from patients.models import DispensingRecord
from patients.scanning import GTIN_NDC_SOURCES, known_products
from shelf.receiving import receive
from shelf.selectors import ndcs_received
from tests import epcis_docs as d
from tests.patients.test_patients_scanning import add_form, page_errors

GS = "\x1d"
SCAN = f"01{d.LOSARTAN_GTIN}17191031{GS}10{d.LOSARTAN_LOT}{GS}21SCANFILL1"


def shipment(*, master: bool) -> None:
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("M", 2))
    receipt = receive(d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving",
                                                    lot=d.LOSARTAN_LOT, expiry=d.LOSARTAN_EXPIRY)],
                                      master=master), site="Main St")
    assert receipt.ok and receipt.applied == 1, receipt.as_dict()


def test_the_shelf_registers_its_reader_with_the_scan():
    assert ndcs_received in GTIN_NDC_SOURCES


def test_a_gtin_received_with_master_data_resolves_in_the_admin_form_without_asking(admin_client, patient):
    shipment(master=True)
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, scan=SCAN, drug="losartan", dispensed_at_0="2019-01-14"))
    assert response.status_code == 302, page_errors(response)
    row = DispensingRecord.objects.get()
    assert (row.ndc, row.lot, row.expiry, row.gtin) == ("13668-0409-30", "4L67C035", date(2019, 10, 31),
                                                         d.LOSARTAN_GTIN)


def test_a_gtin_received_with_master_data_resolves_in_the_csv_scan_column(patient):
    shipment(master=True)
    result = import_dispensing_csv("patient_ref,drug,scan,quantity,dispensed_at\n"
                                   f"P-1,losartan,{SCAN.replace(GS, '|')},30,2019-01-14\n")
    assert result.ok, [str(e) for e in result.errors]
    assert DispensingRecord.objects.get().ndc == "13668-0409-30"


def test_without_master_data_the_same_scan_still_asks_for_the_ndc(admin_client, patient):
    shipment(master=False)  # received, but nothing says which of three products the GTIN is
    assert ndcs_received(d.LOSARTAN_GTIN) == set()
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 add_form(patient, scan=SCAN, drug="losartan", dispensed_at_0="2019-01-14"))
    assert response.status_code == 200 and not DispensingRecord.objects.exists()
    assert "none of them is a product we know yet" in page_errors(response)


def test_what_the_supplier_said_of_the_gtin_settles_it_over_another_candidate_known_as_a_product(patient):
    """The GTIN 00313668409307 can be read as 1366-8409-30, 13668-409-30 or 13668-4093-0. A dispensing row of
    13668-4093-0 makes that product known, which alone would resolve the scan to it; the master data
    received for this very GTIN says 13668-409-30, and that is what the scan takes."""
    DispensingRecord.objects.create(patient=patient, drug="some drug", lot="T1", ndc="13668-4093-0", quantity=1,
                                    dispensed_at=datetime(2019, 1, 1, tzinfo=UTC))
    candidates = list(ndc_candidates(d.LOSARTAN_GTIN))
    assert known_products(candidates, d.LOSARTAN_LOT, d.LOSARTAN_GTIN) == {"13668-4093"}
    shipment(master=True)
    assert known_products(candidates, d.LOSARTAN_LOT, d.LOSARTAN_GTIN) == {"13668-0409"}
    assert known_products(candidates, d.LOSARTAN_LOT) == {"13668-4093"}  # no GTIN given: products only
