"""Receiving streams the document: read through once (checked, master data, packing), then applied a chunk at a
time; memory follows an event, not the document. SYNTHETIC shipments of the real recalled lot of D-0502-2019
(tests/epcis_docs.py)."""

import io
import json
import tracemalloc

import pytest

from shelf import json_stream
from shelf.epcis import open_document, parse_document
from shelf.models import Aggregation, ReceivedEvent, Unit
from shelf.receiving import receive
from tests import epcis_docs as d

pytestmark = pytest.mark.django_db

SITE = "Main St"


def receiving_events(prefix, n):
    return [d.json_event("ObjectEvent", epcs=d.units(d.LOSARTAN_GTIN, [s]), step="receiving", lot=d.LOSARTAN_LOT,
                         expiry=d.LOSARTAN_EXPIRY) for s in d.serials(prefix, n)]


def keys_and_errors(doc):
    return [(e.key, e.error, e.lot) for e in doc.events], doc.products


@pytest.mark.parametrize("build", [lambda: d.shipment_xml(d.serials("A", 5)),
                                   lambda: d.json_document([*receiving_events("B", 3), {"type": "Transformation"},
                                                            "not an event"])])
def test_reads_of_any_size_give_the_same_events(monkeypatch, build):
    whole = keys_and_errors(parse_document(build()))
    monkeypatch.setattr(json_stream, "READ_BYTES", 5)  # every value straddles reads
    assert keys_and_errors(parse_document(io.BytesIO(build()))) == whole


@pytest.mark.parametrize("form", ["json", "xml"])
def test_reading_a_document_holds_one_event_at_a_time(form):
    """Peak memory of reading a 10 MB document stays under half its size (whole-document parsing held several
    times its size)."""
    serials = d.serials("M", 25_000)
    epcs = d.units(d.LOSARTAN_GTIN, serials)
    if form == "json":
        data = d.json_document([d.json_event("ObjectEvent", epcs=[e], step="receiving", lot=d.LOSARTAN_LOT)
                                for e in epcs])
    else:
        data = d.xml_document([d.xml_object_event([e], "receiving", lot=d.LOSARTAN_LOT) for e in epcs])
    size = len(data)
    assert size > 8_000_000
    reader = open_document(io.BytesIO(data))
    tracemalloc.start()
    try:
        count = sum(1 for _ in reader.events())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 25_000
    assert peak < size / 2, (peak, size)


def test_master_data_after_the_events_still_names_the_ndc():
    doc = json.loads(d.json_document(receiving_events("C", 2)))
    header = doc.pop("epcisHeader")
    doc["epcisHeader"] = header  # now after epcisBody
    assert list(doc)[-1] == "epcisHeader"
    receipt = receive(json.dumps(doc).encode(), site=SITE)
    assert receipt.applied == 2
    assert set(Unit.objects.values_list("ndc", flat=True)) == {"13668-0409-30"}


def test_a_case_packed_later_in_the_document_and_in_a_later_chunk_is_still_its_units(monkeypatch):
    monkeypatch.setattr("shelf.receiving.CHUNK", 2)
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("D", 3))
    doc = d.xml_document([
        d.xml_object_event([d.sscc(4)], "receiving", action="OBSERVE", time="2019-01-11T09:00:00Z"),
        d.xml_object_event(epcs, "commissioning", lot=d.LOSARTAN_LOT, expiry=d.LOSARTAN_EXPIRY),
        d.xml_object_event([epcs[0]], "dispensing", time="2019-01-12T09:00:00Z"),
        d.xml_aggregation_event(d.sscc(4), epcs),
    ])
    receipt = receive(doc, site=SITE)
    assert (receipt.applied, receipt.refused, receipt.units_new) == (4, [], 3)
    assert sorted(Unit.objects.values_list("serial", "state", "lot")) == [
        ("D000001", "dispensed", "4L67C035"), ("D000002", "on_hand", "4L67C035"), ("D000003", "on_hand", "4L67C035")]
    assert receive(doc, site=SITE).skipped == 4


def test_the_same_event_in_two_chunks_is_applied_once(monkeypatch):
    monkeypatch.setattr("shelf.receiving.CHUNK", 2)
    (event,) = receiving_events("E", 1)
    event["eventID"] = "urn:uuid:6b9d1a5e-93a4-4c1e-9f43-0a4d5e2f7c11"
    receipt = receive(d.json_document([event, *receiving_events("F", 2), event]), site=SITE)
    assert (receipt.applied, receipt.skipped, receipt.units_new) == (3, 1, 3)


@pytest.mark.parametrize("tail", [b"", b"]}"])
def test_a_document_malformed_after_many_events_writes_nothing(monkeypatch, tail):
    monkeypatch.setattr("shelf.receiving.CHUNK", 2)
    good = d.json_document(receiving_events("G", 5))
    cut = good[:good.rindex(b"}", 0, good.rindex(b"]")) + 1] + b", {" + tail  # the last event never closes
    receipt = receive(cut, site=SITE)
    assert "malformed" in receipt.error
    assert not (Unit.objects.exists() or ReceivedEvent.objects.exists() or Aggregation.objects.exists())


def test_a_document_given_as_a_file_is_read_from_the_file(tmp_path):
    path = tmp_path / "shipment.xml"
    path.write_bytes(d.shipment_xml(d.serials("H", 4)))
    with path.open("rb") as stream:
        receipt = receive(stream, site=SITE)
    assert (receipt.applied, receipt.units_new) == (3, 4)
