"""One table of unit moves (shelf.transitions.UNIT) holds on every path: an EPCIS event, a scan at fill (the admin
form, the CSV import, a row saved another way) and the pharmacist's forms. A quarantined unit leaves quarantine
only by a return confirmed with its count; the legal moves still land.

The recall is the REAL record D-0502-2019 (losartan 50 mg, NDC 13668-409-30, lot 4L67C035); shipments and
patients are SYNTHETIC (tests/epcis_docs.py)."""

import itertools

import pytest

from memory.fact_writes import assert_claim
from patients.csvimport import import_dispensing_csv
from patients.models import DispensingRecord
from shelf import quarantine
from shelf.models import ReceivedEvent, ShelfEvent, ShelfTask, Unit
from shelf.receiving import receive
from shelf.transitions import NEW, UNIT, By, InvalidTransition, allowed, move_units, reachable
from tests import epcis_docs as d
from tests.factories import make_patient, recall_claim
from tests.patients.test_patients_scanning import add_form, page_errors

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("dispatch_not_enqueued", "shelf_match_runs_here")]

SITE, RECALL = "Main St", "D-0502-2019"
S = Unit.State
GS = "\x1d"


def _scan(serial: str) -> str:
    """The pack's DataMatrix as a scanner sends it (GTIN, expiry, lot, serial)."""
    return f"01{d.LOSARTAN_GTIN}17191031{GS}10{d.LOSARTAN_LOT}{GS}21{serial}"


def _epcs(*serials):
    return d.units(d.LOSARTAN_GTIN, serials)


def _state(serial: str) -> str:
    return Unit.objects.get(serial=serial).state


@pytest.fixture
def pharmacist(django_user_model):
    return django_user_model.objects.create_user("synthetic-pharmacist", password="x")


@pytest.fixture
def quarantined(pharmacist):
    """Five units of the recalled lot and two of another lot at Main St; the recall's quarantine confirmed:
    R000001..R000005 quarantined, K000001..K000002 on hand."""
    assert receive(d.shipment_xml(d.serials("R", 5)), site=SITE).applied == 3
    assert receive(d.shipment_xml(d.serials("K", 2), lot=d.OTHER_LOT, case=2), site=SITE).applied == 3
    assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    task = ShelfTask.objects.get()
    assert quarantine.confirm_quarantine(task, counted=5, user=pharmacist) == 5
    return task


# --- The table ---------------------------------------------------------------------------------------------


def test_the_table_lets_only_a_counted_return_or_destruction_take_a_unit_out_of_quarantine():
    states = [NEW, *S.values]
    out_of_quarantine = {(new, by) for new in states for by in By if allowed(S.QUARANTINED, new, by)}
    assert out_of_quarantine == {(S.RETURNED, By.RETURN), (S.DESTROYED, By.DESTRUCTION)}
    # A pharmacist's destruction takes nothing but a quarantined unit.
    assert {(old, new) for old, new in itertools.product(states, states) if allowed(old, new, By.DESTRUCTION)} == {
        (S.QUARANTINED, S.DESTROYED)}
    assert {old for old in states for by in By if allowed(old, S.QUARANTINED, by)} == {S.ON_HAND}
    # Nothing leaves a patient's hands or the incinerator; nothing but a receipt brings a returned unit back.
    assert not any(allowed(S.DISPENSED, new, by) or allowed(S.DESTROYED, new, by) for new in states for by in By)
    assert {(new, by) for new in states for by in By if allowed(S.RETURNED, new, by)} == {(S.ON_HAND, By.EPCIS)}
    # A scan only ever takes an on-hand unit.
    assert {(old, new) for old, new in itertools.product(states, states) if allowed(old, new, By.SCAN)} == {
        (S.ON_HAND, S.DISPENSED)}
    # Several EPCIS steps in one chunk never reach what no single act may do.
    assert not reachable(S.QUARANTINED, S.RETURNED, By.EPCIS)
    assert reachable(S.RETURNED, S.DISPENSED, By.EPCIS) and not allowed(S.RETURNED, S.DISPENSED, By.EPCIS)
    assert set(UNIT) == {NEW, *S.values}


def test_the_writer_refuses_a_move_the_table_does_not_allow_before_writing(quarantined):
    on_hand, held = Unit.objects.get(serial="K000001"), Unit.objects.get(serial="R000001")
    with pytest.raises(InvalidTransition):
        move_units([on_hand, held], S.DISPENSED, by=By.SCAN)  # R000001 is quarantined: neither moves
    assert [_state("K000001"), _state("R000001")] == [S.ON_HAND, S.QUARANTINED]
    with pytest.raises(InvalidTransition):
        move_units([held], S.RETURNED, by=By.EPCIS)
    assert move_units([held], S.RETURNED, by=By.RETURN) == 1 and held.state == S.RETURNED == _state("R000001")


# --- EPCIS -------------------------------------------------------------------------------------------------


def test_a_shipping_event_does_not_return_a_quarantined_unit_and_the_rest_of_the_document_lands(quarantined):
    doc = d.json_document([
        d.json_event("ObjectEvent", epcs=_epcs("R000001", "R000002"), step="shipping", action="OBSERVE",
                     event_id="urn:uuid:ship-quarantined"),
        d.json_event("ObjectEvent", epcs=_epcs("K000001"), step="shipping", action="OBSERVE"),
        d.json_event("ObjectEvent", epcs=_epcs("R000003"), step="dispensing"),
        d.json_event("ObjectEvent", epcs=_epcs("R000004"), step="decommissioning"),
        # One quarantined unit in an event refuses the whole event: the on-hand unit beside it stays.
        d.json_event("ObjectEvent", epcs=_epcs("K000002", "R000005"), step="destroying"),
    ])
    receipt = receive(doc, site=SITE)
    assert receipt.ok and receipt.applied == 1 and receipt.refused_total == 4
    reasons = dict(receipt.refused)
    ship = reasons["urn:uuid:ship-quarantined"]
    assert f"serial R000001 is quarantined for recall {RECALL}" in ship
    assert "Confirm return" in ship and f"/worklist/recall/{RECALL}" in ship and "count" in ship
    others = [r for k, r in receipt.refused if k != "urn:uuid:ship-quarantined"]
    assert "never dispensed" in others[0] and "R000003" in others[0]
    assert all(f"quarantined for recall {RECALL}" in r for r in others)
    assert [_state(f"R00000{i}") for i in range(1, 6)] == [S.QUARANTINED] * 5
    assert (_state("K000001"), _state("K000002")) == (S.RETURNED, S.ON_HAND)
    assert ReceivedEvent.objects.filter(status="refused", reason=ship).count() == 1


def test_the_counted_return_moves_them_and_the_shipping_event_sent_again_then_lands(quarantined, pharmacist):
    doc = d.json_document([d.json_event("ObjectEvent", epcs=_epcs(*d.serials("R", 5)), step="shipping",
                                        action="OBSERVE", event_id="urn:uuid:return-to-supplier")])
    assert receive(doc, site=SITE).refused_total == 1
    assert quarantine.confirm_return(quarantined, counted=5, user=pharmacist, note="RA 77") == 5
    again = receive(doc, site=SITE)  # a refused event took no key: read again, it now moves nothing
    assert (again.applied, again.refused_total, again.units_changed) == (1, 0, 0)
    assert set(Unit.objects.filter(serial__startswith="R").values_list("state", flat=True)) == {S.RETURNED}


def test_a_dispensed_unit_is_not_destroyed_and_a_returned_one_not_dispensed_until_received_again():
    assert receive(d.shipment_xml(d.serials("A", 3)), site=SITE).applied == 3
    first = receive(d.json_document([
        d.json_event("ObjectEvent", epcs=_epcs("A000001"), step="dispensing", time="2019-01-13T09:00:00Z"),
        d.json_event("ObjectEvent", epcs=_epcs("A000002"), step="shipping", action="OBSERVE"),
    ]), site=SITE)
    assert first.applied == 2
    refused = receive(d.json_document([
        d.json_event("ObjectEvent", epcs=_epcs("A000001"), step="decommissioning", time="2019-01-14T09:00:00Z"),
        d.json_event("ObjectEvent", epcs=_epcs("A000002"), step="dispensing", time="2019-01-14T09:00:00Z"),
    ]), site=SITE)
    assert refused.applied == 0 and refused.refused_total == 2
    (destroy, dispense) = [reason for _key, reason in refused.refused]
    assert "A000001 was dispensed to a patient" in destroy and "stays dispensed" in destroy
    assert "A000002 was returned" in dispense and "received again" in dispense
    assert (_state("A000001"), _state("A000002")) == (S.DISPENSED, S.RETURNED)
    # Received again, then dispensed, in one document (one chunk: written once, every step checked).
    later = receive(d.json_document([
        d.json_event("ObjectEvent", epcs=_epcs("A000002"), step="receiving", time="2019-02-01T09:00:00Z"),
        d.json_event("ObjectEvent", epcs=_epcs("A000002"), step="dispensing", time="2019-02-02T09:00:00Z"),
    ]), site=SITE)
    assert later.applied == 2 and later.units_changed == 1 and _state("A000002") == S.DISPENSED


# --- The scan at fill ---------------------------------------------------------------------------------------


def test_the_admin_form_refuses_the_scan_of_a_quarantined_unit_naming_the_recall(quarantined, admin_client,
                                                                                  patient):
    response = admin_client.post("/admin/patients/dispensingrecord/add/", add_form(
        patient, scan=_scan("R000002"), drug="losartan", site=SITE, dispensed_at_0="2019-01-14"))
    assert response.status_code == 200 and not DispensingRecord.objects.exists()
    errors = page_errors(response)
    assert f"quarantined for recall {RECALL}" in errors and "never dispensed" in errors
    assert "fill from another pack" in errors
    assert _state("R000002") == S.QUARANTINED
    # The unrecalled lot on the shelf is dispensed by the same form, and its unit leaves the shelf.
    other = f"01{d.LOSARTAN_GTIN}17191031{GS}10{d.OTHER_LOT}{GS}21K000001"
    response = admin_client.post("/admin/patients/dispensingrecord/add/", add_form(
        patient, scan=other, drug="losartan", site=SITE, dispensed_at_0="2019-01-14"))
    assert response.status_code == 302, page_errors(response)
    unit = Unit.objects.get(serial="K000001")
    assert (unit.state, unit.dispensing_id) == (S.DISPENSED, DispensingRecord.objects.get().pk)


def test_the_csv_scan_column_refuses_a_quarantined_unit_and_writes_nothing(quarantined, patient):
    result = import_dispensing_csv("patient_ref,drug,scan,quantity,dispensed_at,site\n"
                                   f"P-1,losartan,{_scan('R000003').replace(GS, '|')},30,2019-01-14,{SITE}\n")
    assert not result.ok and not DispensingRecord.objects.exists()
    assert any(f"quarantined for recall {RECALL}" in str(e) for e in result.errors)
    assert _state("R000003") == S.QUARANTINED


def test_a_fill_saved_another_way_leaves_a_quarantined_unit_in_quarantine_and_says_so_once(quarantined):
    patient = make_patient("SYN-Q", [{"drug": "losartan", "lot": d.LOSARTAN_LOT, "ndc": d.LOSARTAN_NDC,
                                      "gtin": d.LOSARTAN_GTIN, "serial": "R000004", "site": SITE}],
                           through_service=True)
    unit = Unit.objects.get(serial="R000004")
    assert (unit.state, unit.dispensing_id) == (S.QUARANTINED, None)
    (refusal,) = ShelfEvent.objects.filter(action=ShelfEvent.Action.SCAN_REFUSED)
    assert refusal.recall_number == RECALL and "never dispensed" in refusal.details["reason"]
    assert not ShelfEvent.objects.filter(action=ShelfEvent.Action.SCANNED).exists()
    # Every later write of the patient tries the link again; the refusal is on record once.
    from patients.dispensing import save_dispensing

    row = patient.dispensings.get()
    row.quantity = 60
    save_dispensing(row, actor="synthetic")
    assert ShelfEvent.objects.filter(action=ShelfEvent.Action.SCAN_REFUSED).count() == 1
    assert _state("R000004") == S.QUARANTINED


def test_a_pack_scanned_for_a_second_patient_stays_linked_to_the_first_fill_and_the_shelf_says_so_once():
    assert receive(d.shipment_xml(d.serials("A", 1)), site=SITE).applied == 3
    pack = {"drug": "losartan", "lot": d.LOSARTAN_LOT, "ndc": d.LOSARTAN_NDC, "gtin": d.LOSARTAN_GTIN,
            "serial": "A000001", "site": SITE}
    first = make_patient("SYN-FIRST", [pack], through_service=True).dispensings.get()
    second = make_patient("SYN-SECOND", [pack], through_service=True)
    unit = Unit.objects.get()
    assert (unit.state, unit.dispensing_id) == (S.DISPENSED, first.pk)
    (refusal,) = ShelfEvent.objects.filter(action=ShelfEvent.Action.SCAN_REFUSED)
    assert refusal.details["linked_to"] == first.pk
    assert refusal.details["dispensing"] == second.dispensings.get().pk
    assert "already linked to another fill" in refusal.details["reason"]
    from patients.dispensing import save_dispensing

    row = second.dispensings.get()
    row.quantity = 60
    save_dispensing(row, actor="synthetic")  # every later write of the patient tries again: said once
    assert ShelfEvent.objects.filter(action=ShelfEvent.Action.SCAN_REFUSED).count() == 1
    assert Unit.objects.get().dispensing_id == first.pk


def test_a_scan_after_an_epcis_dispensing_event_names_the_patient_without_moving_the_unit():
    assert receive(d.shipment_xml(d.serials("A", 1)), site=SITE).applied == 3
    assert receive(d.json_document([d.json_event("ObjectEvent", epcs=_epcs("A000001"), step="dispensing")]),
                   site=SITE).applied == 1
    make_patient("SYN-E", [{"drug": "losartan", "lot": d.LOSARTAN_LOT, "ndc": d.LOSARTAN_NDC,
                            "gtin": d.LOSARTAN_GTIN, "serial": "A000001", "site": SITE}], through_service=True)
    unit = Unit.objects.get()
    assert unit.state == S.DISPENSED and unit.dispensing.patient.external_ref == "SYN-E"


# --- The pharmacist's forms ---------------------------------------------------------------------------------


def test_the_return_form_moves_nothing_without_a_count_or_before_the_quarantine(client, people, pharmacist):
    assert receive(d.shipment_xml(d.serials("R", 3)), site=SITE).applied == 3
    assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    task = ShelfTask.objects.get()
    client.force_login(people["pharmacist"])
    url = f"/worklist/shelf/{task.public_id}/"
    assert client.post(url + "return/", {"counted": "3"}, headers={"HX-Request": "true"}).status_code == 409
    assert client.post(url + "quarantine/", {"note": "no count"}, headers={"HX-Request": "true"}).status_code == 400
    assert set(Unit.objects.values_list("state", flat=True)) == {S.ON_HAND}
    assert client.post(url + "quarantine/", {"counted": "3"}, headers={"HX-Request": "true"}).status_code == 200
    assert client.post(url + "return/", {"counted": ""}, headers={"HX-Request": "true"}).status_code == 400
    assert set(Unit.objects.values_list("state", flat=True)) == {S.QUARANTINED}
    assert client.post(url + "return/", {"counted": "2", "note": "one missing"},
                       headers={"HX-Request": "true"}).status_code == 200
    assert set(Unit.objects.values_list("state", flat=True)) == {S.RETURNED}
    task.refresh_from_db()
    assert (task.quarantine_count, task.return_count) == (3, 2)
