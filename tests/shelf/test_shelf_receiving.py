"""Receiving EPCIS documents (SYNTHETIC shipments of the real recalled lot of D-0502-2019; tests/epcis_docs.py)."""

import os
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shelf.epcis import parse_document
from shelf.models import Aggregation, ReceivedEvent, Unit
from shelf.receiving import receive
from shelf.selectors import on_hand
from tests import epcis_docs as d

pytestmark = pytest.mark.django_db

SITE = "Main St"


def states(site=SITE):
    return sorted(Unit.objects.filter(site=site).values_list("serial", "state"))


def test_a_shipment_lands_its_units_on_hand_with_lot_expiry_and_ndc():
    receipt = receive(d.shipment_xml(d.serials("A", 3)), site=SITE, source="asn.xml")
    assert receipt.ok and receipt.applied == 3 and not receipt.refused
    unit = Unit.objects.get(serial="A000001")
    assert (unit.gtin, unit.ndc, unit.lot, unit.lot_printed, str(unit.expiry), unit.state) == (
        d.LOSARTAN_GTIN, "13668-0409-30", "4L67C035", "4L67C035", "2019-10-31", "on_hand")
    assert unit.product_name.startswith("Losartan")
    assert Aggregation.objects.filter(parent=d.sscc(1)).count() == 3


def test_resending_a_document_changes_nothing():
    doc = d.shipment_xml(d.serials("A", 3))
    receive(doc, site=SITE)
    before = (Unit.objects.count(), ReceivedEvent.objects.count())
    again = receive(doc, site=SITE)
    assert (again.applied, again.skipped, again.units_new) == (0, 3, 0)
    assert (Unit.objects.count(), ReceivedEvent.objects.count()) == before


def test_the_same_document_at_another_site_is_that_sites_stock():
    doc = d.shipment_xml(d.serials("A", 2))
    receive(doc, site=SITE)
    receive(doc, site="Elm St")
    assert Unit.objects.filter(site="Elm St").count() == 2


def test_each_biz_step_moves_the_unit():
    receive(d.shipment_xml(d.serials("A", 5)), site=SITE)
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("A", 5))
    doc = d.json_document([
        d.json_event("ObjectEvent", epcs=[epcs[0]], step="dispensing", time="2019-01-13T09:00:00Z"),
        d.json_event("ObjectEvent", epcs=[epcs[1]], step="urn:epcglobal:cbv:bizstep:destroying", action="OBSERVE"),
        d.json_event("ObjectEvent", epcs=[epcs[2]], step="https://ref.gs1.org/cbv/BizStep-decommissioning"),
        d.json_event("ObjectEvent", epcs=[epcs[3]], step="shipping", action="OBSERVE"),
    ])
    receipt = receive(doc, site=SITE)
    assert receipt.applied == 4, receipt.refused
    assert states() == [("A000001", "dispensed"), ("A000002", "destroyed"), ("A000003", "destroyed"),
                        ("A000004", "returned"), ("A000005", "on_hand")]
    (lot,) = on_hand(SITE)
    c = lot.counts
    assert (c.received, c.on_hand, c.dispensed, c.returned, c.destroyed) == (5, 1, 1, 1, 2)
    assert c.received - c.dispensed - c.returned - c.destroyed - c.quarantined == c.on_hand
    # A returned unit received again is on hand again.
    receive(d.json_document([d.json_event("ObjectEvent", epcs=[epcs[3]], step="receiving",
                                          time="2019-02-01T09:00:00Z")]), site=SITE)
    assert Unit.objects.get(serial="A000004").state == "on_hand"


def test_a_receiving_aggregation_event_and_a_transaction_event():
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("B", 2))
    more = d.units(d.LOSARTAN_GTIN, d.serials("C", 2))
    doc = d.xml_document([
        d.xml_object_event(epcs + more, "commissioning", lot=d.LOSARTAN_LOT, expiry=d.LOSARTAN_EXPIRY),
        d.xml_aggregation_event(d.sscc(7), epcs, step="receiving"),
        d.xml_transaction_event(more, "receiving"),
    ])
    receipt = receive(doc, site=SITE)
    assert receipt.applied == 3 and receipt.units_new == 4
    assert Unit.objects.filter(state="on_hand", lot="4L67C035").count() == 4


def test_a_case_received_later_is_expanded_from_the_packing_of_an_earlier_document():
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("D", 3))
    receive(d.xml_document([d.xml_object_event(epcs, "commissioning", lot=d.LOSARTAN_LOT,
                                               expiry=d.LOSARTAN_EXPIRY),
                            d.xml_aggregation_event(d.sscc(9), epcs)]), site=SITE)
    assert Unit.objects.count() == 0  # commissioning and packing put nothing on the shelf
    receive(d.json_document([d.json_event("ObjectEvent", epcs=[d.sscc(9)], step="receiving",
                                          action="OBSERVE")]), site=SITE)
    # The lot was noted by a document that landed no unit: the units arrive without it (matched by product).
    assert Unit.objects.filter(state="on_hand").count() == 3


def test_epcis_2_json_ld_with_ilmd_lands_units():
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("E", 2))
    doc = d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot=d.LOSARTAN_LOT,
                                        expiry=d.LOSARTAN_EXPIRY, event_id="ni:///sha-256;abc?ver=CBV2.0")])
    receipt = receive(doc, site=SITE)
    assert receipt.applied == 1
    assert ReceivedEvent.objects.get().event_key == "ni:///sha-256;abc?ver=CBV2.0"
    assert set(Unit.objects.values_list("lot", flat=True)) == {"4L67C035"}


def test_xxe_and_billion_laughs_are_refused_before_any_entity_is_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("PHI")
    xxe = (f'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file://{secret}">]>'
           '<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:1"><EPCISBody><EventList>'
           '<ObjectEvent><eventTime>&x;</eventTime></ObjectEvent></EventList></EPCISBody>'
           '</epcis:EPCISDocument>').encode()
    laughs = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
              + "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i else "&lol;" * 10}">'
                        for i in range(10))
              + ']><epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:1">&lol9;</epcis:EPCISDocument>').encode()
    for doc in (xxe, laughs):
        receipt = receive(doc, site=SITE)
        assert not receipt.ok and "entities or external references" in receipt.error
    assert ReceivedEvent.objects.count() == 0
    # An external DTD is never fetched (the parser has no resolver): the document is read without it.
    external_dtd = (b'<?xml version="1.0"?><!DOCTYPE d SYSTEM "http://127.0.0.1:9/x.dtd">'
                    b'<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:1"/>')
    assert receive(external_dtd, site=SITE).error == "The EPCIS document has no EventList."


@pytest.mark.parametrize("doc, says", [
    (b"<epcis:EPCISDocument xmlns:epcis='urn:epcglobal:epcis:xsd:1'><EPCISBody>", "malformed"),
    (b"{\"type\": \"EPCISDocument\", ", "malformed"),
    (b"<html><body/></html>", "not an EPCISDocument"),
    (b"{\"type\": \"Invoice\"}", "not an EPCIS 2.0 document"),
    (b"PK\x03\x04", "neither XML"),
])
def test_malformed_documents_are_refused_with_a_reason(doc, says):
    receipt = receive(doc, site=SITE)
    assert not receipt.ok and says in receipt.error


def test_oversize_documents_are_refused(monkeypatch):
    monkeypatch.setattr("shelf.epcis.MAX_DOCUMENT_BYTES", 100)
    receipt = receive(d.shipment_xml(d.serials("A", 1)), site=SITE)
    assert "limit" in receipt.error


def test_bad_events_are_refused_with_reasons_while_good_ones_land():
    good = d.units(d.LOSARTAN_GTIN, d.serials("F", 2))
    not_a_drug = "urn:epc:id:sgtin:0614141.107346.2017"  # a GS1 example GTIN that is no NDC
    doc = d.json_document([
        d.json_event("ObjectEvent", epcs=good, step="receiving", lot=d.LOSARTAN_LOT, expiry=d.LOSARTAN_EXPIRY),
        d.json_event("ObjectEvent", epcs=[not_a_drug], step="receiving"),
        d.json_event("ObjectEvent", epcs=["urn:epc:id:grai:0614141.12345.400"], step="receiving"),
        dict(d.json_event("ObjectEvent", epcs=good, step="receiving"), eventTime="yesterday"),
        {"type": "TransformationEvent"},
        "not an event",
    ])
    receipt = receive(doc, site=SITE)
    assert receipt.applied == 1 and len(receipt.refused) == 5
    reasons = " | ".join(r for _, r in receipt.refused)
    for text in ("not a US drug GTIN", "neither an SGTIN nor an SSCC", "no eventTime", "TransformationEvent",
                 "not a JSON object"):
        assert text in reasons
    assert Unit.objects.count() == 2
    assert ReceivedEvent.objects.filter(status="refused").count() == 5


def test_the_gtin_hyphenation_is_resolved_without_master_data_only_when_one_product_is_known():
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("G", 1))
    receive(d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot="X1")], master=False),
            site=SITE)
    unit = Unit.objects.get()
    assert unit.ndc == "" and sorted(unit.ndc_products) == ["01366-8409", "13668-0409", "13668-4093"]


def test_parse_reads_the_same_event_from_xml_and_json_to_the_same_hash():
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("H", 2))
    xml = parse_document(d.xml_document([d.xml_object_event(epcs, "receiving", time="2019-01-12T09:00:00Z")]))
    js = parse_document(d.json_document([{**d.json_event("ObjectEvent", epcs=epcs, step="receiving",
                                                         time="2019-01-12T09:00:00Z"),
                                          "disposition": "in_progress", "readPoint": {"id": d.SUPPLIER},
                                          "bizLocation": {"id": d.SUPPLIER}}]))
    assert xml.events[0].key == js.events[0].key


def test_the_management_command_receives_a_file(tmp_path, capsys):
    path = tmp_path / "shipment.xml"
    path.write_bytes(d.shipment_xml(d.serials("J", 4)))
    call_command("receive_epcis", str(path), "--site", SITE)
    out = capsys.readouterr().out
    assert "3 events applied" in out and "4 new units" in out
    assert Unit.objects.filter(site=SITE, state="on_hand").count() == 4


def test_a_bare_doctype_without_declarations_is_read():
    doc = d.shipment_xml(d.serials("L", 1)).replace(b"?>", b"?><!DOCTYPE project>", 1)
    assert receive(doc, site=SITE).applied == 3


@pytest.mark.skipif(not os.environ.get("UNSAY_GS1_EPCIS_DIR"),
                    reason="UNSAY_GS1_EPCIS_DIR is not set (a checkout of github.com/gs1/EPCIS: its XML and JSON "
                           "examples are not shipped here, their licence grants no redistribution)")
def test_gs1s_published_examples_are_read_as_they_are():
    """Every example document is read or refused with a reason; none crashes. GS1's examples use GS1's example
    company prefix 0614141 (no NDC), so their events are refused as not US drug units, never applied."""
    files = [p for p in Path(os.environ["UNSAY_GS1_EPCIS_DIR"]).rglob("*")
             if p.suffix in (".xml", ".jsonld", ".json") and p.is_file()
             and not any(part in str(p) for part in ("Schema", "Context", "CBV", "CaptureJob"))]
    assert files
    for i, path in enumerate(files):
        receipt = receive(path.read_bytes(), site=f"gs1-{i}")
        assert receipt.ok or "EPCISDocument" in receipt.error, (path, receipt.error)


@pytest.mark.django_db(transaction=True)
def test_the_same_document_sent_twice_at_once_lands_once():
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    doc = d.shipment_xml(d.serials("T", 20))

    def send(_):
        try:
            return receive(doc, site=SITE)
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        receipts = list(pool.map(send, range(2)))
    assert sorted(r.applied for r in receipts) == [0, 3] and sorted(r.skipped for r in receipts) == [0, 3]
    assert Unit.objects.filter(site=SITE).count() == 20


def test_an_error_declaration_is_refused_for_review_not_applied():
    receive(d.shipment_xml(d.serials("V", 2)), site=SITE)
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("V", 2))
    event = dict(d.json_event("ObjectEvent", epcs=epcs, step="destroying"),
                 errorDeclaration={"declarationTime": "2019-02-01T00:00:00Z", "reason": "incorrect_data"})
    receipt = receive(d.json_document([event]), site=SITE)
    assert receipt.applied == 0 and "error declaration" in receipt.refused[0][1]
    assert set(Unit.objects.values_list("state", flat=True)) == {"on_hand"}


def test_overlong_lots_nul_characters_and_bad_sites_are_refused_not_crashed():
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("N", 1))
    doc = d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot="L" * 500)])
    receipt = receive(doc, site=SITE)
    assert receipt.applied == 0 and "longer than GS1's 20 characters" in receipt.refused[0][1]
    nul = d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot="A\u0000B")])
    assert "NUL" in receive(nul, site=SITE).error
    assert "site" in receive(d.shipment_xml(["1"]), site="S" * 201).error
    assert not Unit.objects.exists()


@pytest.mark.parametrize("body", [
    {"type": "EPCISDocument", "epcisBody": []},
    {"type": "EPCISDocument", "epcisHeader": {"epcisMasterData": {"vocabularyList": [[1]]}}, "epcisBody": {}},
    {"type": "EPCISDocument", "epcisBody": {"eventList": 7}},
])
def test_documents_of_the_wrong_shape_are_refused_not_crashed(body):
    import json

    assert receive(json.dumps(body).encode(), site=SITE).error


@pytest.mark.parametrize("field, value", [("bizTransactionList", 7), ("ilmd", {"cbvmda:lotNumber": ["x"]}),
                                          ("epcList", [{"a": 1}]), ("eventTime", 20190110), ("readPoint", [1])])
def test_events_with_fields_of_the_wrong_json_type_are_refused_with_a_reason(field, value):
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("M", 1))
    good = d.json_event("ObjectEvent", epcs=d.units(d.LOSARTAN_GTIN, d.serials("G", 1)), step="receiving")
    bad = dict(d.json_event("ObjectEvent", epcs=epcs, step="receiving"), **{field: value})
    receipt = receive(d.json_document([good, bad]), site=SITE)
    assert receipt.ok and receipt.applied + len(receipt.refused) == 2 and receipt.applied >= 1


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30)
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=3), max_leaves=8)
EVENT_FIELDS = ["type", "eventID", "eventTime", "action", "bizStep", "epcList", "parentID", "childEPCs", "ilmd",
                "bizLocation", "readPoint", "bizTransactionList", "disposition", "errorDeclaration"]


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(changes=st.dictionaries(st.sampled_from(EVENT_FIELDS), JSON_VALUES, min_size=1, max_size=4))
def test_any_json_in_an_events_fields_is_applied_or_refused_never_a_crash(changes):
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("H", 1))
    event = {**d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot=d.LOSARTAN_LOT), **changes}
    with transaction.atomic():
        receipt = receive(d.json_document([event]), site=SITE)
        assert receipt.error or receipt.applied + receipt.skipped + len(receipt.refused) == 1
        transaction.set_rollback(True)
