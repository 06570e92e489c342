"""EPCIS edges: a refused event leaves its eventID free, identifiers are bounded alike in every form and refused
whole when too long. SYNTHETIC shipments of the real recalled lot of D-0502-2019 (tests/epcis_docs.py)."""

import pytest

from drugs import gs1
from shelf.epcis import MAX_EVENT_ID_CHARS, parse_document
from shelf.models import ReceivedEvent, Unit
from shelf.receiving import receive
from tests import epcis_docs as d

pytestmark = pytest.mark.django_db

SITE = "Main St"
EVENT_ID = "urn:uuid:1b4e28ba-2fa1-11d2-883f-0016d3cca427"


def digital_link(gtin, serial):
    return f"https://id.gs1.org/01/{gtin}/21/{serial}"


def test_a_refused_event_leaves_its_event_id_free_for_the_corrected_resend():
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("R", 2))
    wrong = d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot="L" * 21,
                                          event_id=EVENT_ID)])
    first = receive(wrong, site=SITE)
    assert first.applied == 0 and len(first.refused) == 1
    # The same refused content again: refused again, with the same reason (not "already received").
    again = receive(wrong, site=SITE)
    assert (again.applied, again.skipped, again.refused) == (0, 0, first.refused)
    corrected = d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot=d.LOSARTAN_LOT,
                                              expiry=d.LOSARTAN_EXPIRY, event_id=EVENT_ID)])
    landed = receive(corrected, site=SITE)
    assert (landed.applied, landed.skipped, landed.refused, landed.units_new) == (1, 0, [], 2)
    assert set(Unit.objects.filter(site=SITE).values_list("lot", "state")) == {("4L67C035", "on_hand")}
    # Once applied, the eventID is taken: a resend is already received, and both refusals stay on record.
    assert (receive(corrected, site=SITE).skipped, receive(wrong, site=SITE).skipped) == (1, 1)
    assert sorted(ReceivedEvent.objects.filter(event_key=EVENT_ID).values_list("status", flat=True)) == [
        "applied", "refused", "refused"]


def test_an_event_refused_earlier_in_the_same_document_does_not_block_its_correction_there():
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("S", 1))
    doc = d.json_document([
        d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot="L" * 21, event_id=EVENT_ID),
        d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot=d.LOSARTAN_LOT, event_id=EVENT_ID),
        d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot="OTHER", event_id=EVENT_ID),
    ])
    receipt = receive(doc, site=SITE)
    assert (receipt.applied, len(receipt.refused), receipt.skipped) == (1, 1, 1)
    assert Unit.objects.get().lot == "4L67C035"


@pytest.mark.parametrize("serial", ["A" * 21, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"])
def test_an_overlong_serial_is_refused_whole_in_the_urn_and_the_digital_link_alike(serial):
    urn, link = d.units(d.LOSARTAN_GTIN, [serial])[0], digital_link(d.LOSARTAN_GTIN, serial)
    assert gs1.sgtin(urn) is None and gs1.sgtin(link) is None
    assert "serial" in gs1.epc_refusal(urn) and gs1.epc_refusal(urn) == gs1.epc_refusal(link)
    receipt = receive(d.json_document([d.json_event("ObjectEvent", epcs=[urn], step="receiving"),
                                       d.json_event("ObjectEvent", epcs=[link], step="receiving")]), site=SITE)
    assert receipt.applied == 0 and len(receipt.refused) == 2
    assert all("longer than GS1's 20 characters" in reason for _, reason in receipt.refused)
    assert not Unit.objects.exists()


def test_two_long_digital_link_serials_sharing_twenty_characters_never_collapse_into_one_unit():
    serials = ["X" * 20 + "1", "X" * 20 + "2"]
    doc = d.json_document([d.json_event("ObjectEvent", epcs=[digital_link(d.LOSARTAN_GTIN, s) for s in serials],
                                        step="receiving", lot=d.LOSARTAN_LOT)])
    receipt = receive(doc, site=SITE)
    assert receipt.applied == 0 and not Unit.objects.exists()


def test_a_twenty_character_serial_is_the_same_unit_in_every_form():
    serial = "AB/CD%EF" + "1" * 12  # 20 characters; '/' and '%' are escaped in both URI forms
    urn = "urn:epc:id:sgtin:0313668.040930." + serial.replace("%", "%25").replace("/", "%2F")
    link = digital_link(d.LOSARTAN_GTIN, serial.replace("%", "%25").replace("/", "%2F"))
    assert gs1.sgtin(urn) == gs1.sgtin(link) == (d.LOSARTAN_GTIN, serial)
    xml = d.xml_document([d.xml_object_event([urn], "receiving", lot=d.LOSARTAN_LOT, expiry=d.LOSARTAN_EXPIRY)])
    js = d.json_document([d.json_event("ObjectEvent", epcs=[link], step="receiving", time="2019-01-13T09:00:00Z")])
    assert receive(xml, site=SITE).applied == 1 and receive(js, site=SITE).applied == 1
    assert list(Unit.objects.values_list("serial", "lot")) == [(serial, "4L67C035")]


@pytest.mark.parametrize("form", ["json", "xml"])
def test_an_overlong_event_id_is_refused_whole_not_cut(form):
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("U", 1))
    long_id = "urn:uuid:" + "7" * MAX_EVENT_ID_CHARS
    if form == "json":
        doc = d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving", event_id=long_id)])
    else:
        doc = d.xml_document([d.xml_object_event(epcs, "receiving", event_id=long_id)])
    receipt = receive(doc, site=SITE)
    assert receipt.applied == 0 and "eventID" in receipt.refused[0][1]
    assert receipt.refused[0][0].startswith("sha256:")
    assert not Unit.objects.exists()


@pytest.mark.parametrize("uri", [
    "urn:epc:id:sscc:0313668." + "1" * 40,                     # an SSCC has 17 digits after its prefix
    "https://id.gs1.org/00/" + "3" * 30,                         # and 18 in a Digital Link
    "https://id.gs1.org/01/00313668409307/21/A1/more/path",     # a serial does not end at its first 20 characters
])
def test_malformed_or_overlong_case_and_unit_identifiers_are_refused(uri):
    receipt = receive(d.json_document([d.json_event("ObjectEvent", epcs=[uri], step="receiving")]), site=SITE)
    assert receipt.applied == 0 and [reason for _, reason in receipt.refused] == [gs1.epc_refusal(uri)]
    assert gs1.epc_refusal(uri) and not gs1.is_case(uri) and gs1.sgtin(uri) is None


def test_an_overlong_parent_is_refused_whole_in_json_and_xml():
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("P", 1))
    parent = "urn:epc:id:sscc:0313668." + "9" * 300
    js = d.json_document([d.json_event("AggregationEvent", parent=parent, children=epcs, step="packing")])
    xml = d.xml_document([d.xml_aggregation_event(parent, epcs)])
    for doc in (js, xml):
        receipt = receive(doc, site=SITE)
        assert receipt.applied == 0 and len(receipt.refused) == 1, receipt.refused
    assert parse_document(js).events[0].error == parse_document(xml).events[0].error
