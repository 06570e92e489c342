"""Memory has a bound for any document the size limit allows: an event over MAX_EVENT_CHARS is read through
without being kept and refused whole (the others land), a master-data element that large refuses the document,
a chunk is cut by units as well as events, lots noted for many units move to disk, and a receipt lists a bounded
number of refusals while counting them all. SYNTHETIC units of the real recalled lot of D-0502-2019
(tests/epcis_docs.py); the limits are lowered so the documents stay small."""

import io
import json
import tracemalloc

import pytest

from shelf import epcis, json_stream, lot_notes, receiving
from shelf.epcis import open_document, parse_document
from shelf.models import ReceivedEvent, Unit
from shelf.receiving import receive
from tests import epcis_docs as d

pytestmark = pytest.mark.django_db

SITE = "Main St"
LIMIT = 4096  # characters of one event, for these tests


@pytest.fixture
def small_events(monkeypatch):
    monkeypatch.setattr(epcis, "MAX_EVENT_CHARS", LIMIT)


def _documents(big_units, prefix):
    """(json, xml): a small receiving event, one naming `big_units` units, another small one."""
    small_a, big, small_b = (d.units(d.LOSARTAN_GTIN, d.serials(f"{prefix}{p}", n))
                             for p, n in (("A", 1), ("B", big_units), ("C", 1)))
    as_json = d.json_document([d.json_event("ObjectEvent", epcs=e, step="receiving", lot=d.LOSARTAN_LOT,
                                            expiry=d.LOSARTAN_EXPIRY) for e in (small_a, big, small_b)])
    as_xml = d.xml_document([d.xml_object_event(e, "receiving", lot=d.LOSARTAN_LOT, expiry=d.LOSARTAN_EXPIRY)
                             for e in (small_a, big, small_b)])
    return {"json": as_json, "xml": as_xml}


@pytest.mark.parametrize("form", ["json", "xml"])
def test_an_event_over_the_limit_is_refused_whole_and_the_others_land(small_events, form):
    doc = _documents(400, form[0].upper())[form]  # 400 units: about 20,000 characters
    receipt = receive(doc, site=SITE)
    assert (receipt.applied, receipt.refused_total, receipt.units_new) == (2, 1, 2)
    (key, reason), = receipt.refused
    assert "Event 2 of the document is over" in reason and "nothing of it was applied" in reason
    assert Unit.objects.filter(site=SITE).count() == 2
    # Sent again: the two applied are skipped, the big one is refused again under the same key.
    again = receive(doc, site=SITE)
    assert (again.applied, again.skipped, again.refused) == (0, 2, [(key, reason)])
    assert ReceivedEvent.objects.filter(site=SITE, status="refused").count() == 2


@pytest.mark.parametrize("form", ["json", "xml"])
def test_an_event_just_under_the_limit_lands(small_events, form):
    doc = _documents(40, form[0].upper())[form]  # 40 units: about 2,000 characters
    receipt = receive(doc, site=SITE)
    assert (receipt.applied, receipt.refused, receipt.units_new) == (3, [], 42)


def test_a_master_data_element_over_the_limit_refuses_the_document(small_events):
    doc = json.loads(d.json_document(_events := [d.json_event("ObjectEvent", epcs=d.units(d.LOSARTAN_GTIN, ["M1"]),
                                                              step="receiving", lot=d.LOSARTAN_LOT)]))
    element = doc["epcisHeader"]["epcisMasterData"]["vocabularyList"][0]["vocabularyElementList"][0]
    element["attributes"].append({"id": "urn:epcglobal:cbv:mda#regulatedProductName", "attribute": "x" * LIMIT})
    receipt = receive(json.dumps(doc).encode(), site=SITE)
    assert "master-data element is over" in receipt.error and not Unit.objects.exists()
    xml = d.xml_document([d.xml_object_event(d.units(d.LOSARTAN_GTIN, ["M2"]), "receiving", lot=d.LOSARTAN_LOT)])
    padded = xml.replace(b"</VocabularyElement>", b"<attribute id=\"x\">" + b"y" * LIMIT + b"</attribute>"
                         b"</VocabularyElement>", 1)
    assert padded != xml
    assert "master-data element is over" in receive(padded, site=SITE).error


def test_a_malformed_value_over_the_limit_still_refuses_the_document(small_events):
    doc = _documents(400, "J")["json"]
    broken = doc.replace(b'"urn:epc:id:sgtin', b'urn:epc:id:sgtin', 1 + 200)  # inside the big event
    assert "malformed" in receive(broken, site=SITE).error


@pytest.mark.parametrize("reads", [5, 1 << 18])
def test_the_stream_hands_out_too_large_for_a_value_over_its_limit_whatever_the_reads(monkeypatch, reads):
    monkeypatch.setattr(json_stream, "READ_BYTES", reads)
    text = json.dumps({"list": [{"n": 1}, {"pad": "x" * 500}, {"n": [2] * 300}, {"n": 3}]}).encode()
    values = [v for p, v in json_stream.JsonStream(io.BytesIO(text)).values(lambda p: p == ("list", "*"), 400)]
    assert values == [json_stream.ARRAY, {"n": 1}, json_stream.TOO_LARGE, json_stream.TOO_LARGE, {"n": 3}]


@pytest.mark.parametrize("form", ["json", "xml"])
def test_reading_one_huge_event_holds_a_bounded_amount(form, monkeypatch):
    """A single event of 150,000 units (about 7 MB): refused, and the reading's peak memory follows the limit of
    one event, not the event (decoding it whole held several times its size)."""
    limit = 256 * 1024
    monkeypatch.setattr(epcis, "MAX_EVENT_CHARS", limit)
    data = _documents(150_000, form[0].upper())[form]
    assert len(data) > 6_500_000
    reader = open_document(io.BytesIO(data))
    tracemalloc.start()
    try:
        events = list(reader.events())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [bool(e.error) for e in events] == [False, True, False]
    assert peak < 8 * limit < len(data) / 3, (peak, len(data))


def test_lots_noted_for_many_units_move_to_disk_and_still_reach_the_units(monkeypatch):
    monkeypatch.setattr(lot_notes, "IN_MEMORY", 50)
    monkeypatch.setattr(receiving, "CHUNK", 40)  # chunks cut by units: the commissioning event names 120
    spilled = []
    real_spill = lot_notes.LotNotes._spill
    monkeypatch.setattr(lot_notes.LotNotes, "_spill", lambda self: spilled.append(1) or real_spill(self))
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("N", 120))
    doc = d.xml_document([
        d.xml_object_event(epcs, "commissioning", lot=d.LOSARTAN_LOT, expiry=d.LOSARTAN_EXPIRY),
        d.xml_object_event(epcs[:60], "commissioning", lot="OTHERLOT", expiry="2031-01-31"),  # the first note holds
        *[d.xml_object_event([e], "receiving", time="2019-01-11T09:00:00Z") for e in epcs],
    ])
    receipt = receive(doc, site=SITE)
    assert spilled == [1] and (receipt.applied, receipt.refused, receipt.units_new) == (122, [], 120)
    assert set(Unit.objects.filter(site=SITE).values_list("lot", "expiry")) == {
        ("4L67C035", parse_document(doc).events[0].expiry)}


def test_lot_notes_answer_the_same_in_memory_and_on_disk():
    from datetime import date

    with lot_notes.LotNotes(in_memory=10**6) as memory, lot_notes.LotNotes(in_memory=3) as disk:
        for notes in (memory, disk):
            notes.note(["a", "b"], "L1", date(2030, 1, 31))
            notes.note(["b", "c", "d"], "L2", None)
            notes.note([f"u{i}" for i in range(10)], "L3", date(2031, 5, 1))
        wanted = ["a", "b", "c", "zz", "u9"]
        assert memory.get_many(wanted) == disk.get_many(wanted) == {
            "a": ("L1", date(2030, 1, 31)), "b": ("L1", date(2030, 1, 31)), "c": ("L2", None),
            "u9": ("L3", date(2031, 5, 1))}
        assert len(memory) == len(disk) == 14 and disk._db is not None and memory._db is None


def test_a_receipt_lists_a_bounded_number_of_refusals_and_counts_them_all(monkeypatch):
    monkeypatch.setattr(receiving, "REFUSALS_LISTED", 2)
    doc = d.xml_document([d.xml_object_event([f"urn:epc:id:sgtin:bad.{i}"], "receiving") for i in range(5)])
    receipt = receive(doc, site=SITE)
    assert (receipt.refused_total, len(receipt.refused)) == (5, 2)
    assert receipt.as_dict()["refused_total"] == 5
    assert ReceivedEvent.objects.filter(site=SITE, status="refused").count() == 5
