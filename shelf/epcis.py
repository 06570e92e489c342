"""Reading EPCIS documents: 1.2 XML and 2.0 JSON / JSON-LD (and 2.0 XML), into plain events.

    open_document(data) -> DocumentReader       bytes or a binary file; .events() reads it from the start, one
                                                event at a time (master data filled in as it is read)
    parse_document(data) -> Document            all events in a list (small documents, tests)

Documents are streamed: XML through defusedxml's iterparse (each event element dropped once read), JSON
through shelf.json_stream (each event decoded on its own), so memory follows one event, not the document.
A document-level fault (malformed, not EPCIS) can surface only once the reading reaches it: the caller
reads the whole document once before applying anything (shelf.receiving).

XML is parsed by defusedxml with entities and external references forbidden: a document declaring an entity
(the way in for external entities, XXE, and for entity expansion, "billion laughs") is refused whole, before
any entity is read. A bare DOCTYPE without declarations is read (GS1's example documents carry one).
Oversize input is refused before parsing (MAX_DOCUMENT_BYTES); an event over MAX_EVENT_CHARS of text is
read through, never kept, and refused whole (a master-data element that large refuses the document). An
event that cannot be read (no time, an unreadable EPC, an unknown event type) comes back with `error` set,
so the caller records it as refused with its reason while the other events of the same document still land.

The GS1 EPCIS XSDs are not shipped (they are not available offline here): structure is checked by hand —
the document element must be an EPCISDocument / EPCISQueryDocument and each event must carry what the
shelf reads.
"""

import functools
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import BinaryIO

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError as XmlParseError
from defusedxml.ElementTree import iterparse as xml_iterparse

from drugs import gs1

from .json_stream import ARRAY, TOO_LARGE, JsonStream, JsonStreamError

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
# One event (or master-data element) is at most this much text, about 150,000 units in its lists: a pallet of
# a few thousand packs is far under it. A longer event is read through without being kept and refused whole,
# so memory has a bound whatever a document under MAX_DOCUMENT_BYTES holds.
MAX_EVENT_CHARS = 8 * 1024 * 1024
# eventID, locations and business transactions: URIs, bounded like the column that keeps the eventID.
MAX_EVENT_ID_CHARS = 300
EVENT_TYPES = ("ObjectEvent", "AggregationEvent", "TransactionEvent")
# CBV 1.2 URNs, CBV 2.0 bare words and Web URIs all name the same step.
_STEP_PREFIXES = ("urn:epcglobal:cbv:bizstep:", "https://ref.gs1.org/cbv/BizStep-", "http://ref.gs1.org/cbv/BizStep-",
                  "cbv:BizStep-")
_DISP_PREFIXES = ("urn:epcglobal:cbv:disp:", "https://ref.gs1.org/cbv/Disp-", "http://ref.gs1.org/cbv/Disp-",
                  "cbv:Disp-")
_MDA = ("urn:epcglobal:cbv:mda#", "urn:epcglobal:cbv:mda:", "cbvmda:", "https://ref.gs1.org/cbv/mda/",
        "https://gs1.org/voc/")


# An error declaration says an earlier event was wrong; undoing what it did to units is for a person to decide.
ERROR_DECLARATION = ("The event is an error declaration (it says an earlier event was wrong): not applied "
                     "automatically; review the units it names.")


class DocumentError(ValueError):
    """The document as a whole cannot be read (nothing in it is applied)."""


@dataclass
class Event:
    type: str
    event_id: str = ""
    event_time: datetime | None = None
    action: str = ""
    biz_step: str = ""
    disposition: str = ""
    epcs: list[str] = field(default_factory=list)
    parent: str = ""
    children: list[str] = field(default_factory=list)
    lot: str = ""
    expiry: date | None = None
    biz_location: str = ""
    read_point: str = ""
    transactions: list[str] = field(default_factory=list)
    error: str = ""

    _key: str = field(default="", repr=False, compare=False)

    @property
    def key(self) -> str:
        """eventID when the sender gave one; else a hash of what the event says (sorted lists, so the same
        event written in another order or another format hashes the same). Computed once (cached_property
        takes a lock per read on Python 3.11, a tenth of the receiving time)."""
        if not self._key:
            self._key = self._compute_key()
        return self._key

    def _compute_key(self) -> str:
        # An eventID over the bound is refused (never cut, which could make two events one): the refusal is
        # recorded under the content hash, which still tells a resend of the same content.
        if self.event_id and len(self.event_id) <= MAX_EVENT_ID_CHARS:
            return self.event_id
        content = [self.type, self.event_time.isoformat() if self.event_time else "", self.action, self.biz_step,
                   self.disposition, sorted(self.epcs), self.parent, sorted(self.children), self.lot,
                   self.expiry.isoformat() if self.expiry else "", self.biz_location, self.read_point,
                   sorted(self.transactions), self.error]
        return "sha256:" + hashlib.sha256(json.dumps(content, separators=(",", ":")).encode()).hexdigest()


@dataclass
class Document:
    format: str  # "xml" | "json"
    events: list[Event]
    # GTIN-14 -> {"ndc": "13668-409-30" as sent, "name": ...} from EPCIS master data (EPCClass vocabulary)
    products: dict[str, dict] = field(default_factory=dict)
    # (GTIN-14, lot) -> expiry date, from LGTIN master data
    lot_expiry: dict[tuple[str, str], date] = field(default_factory=dict)


def too_large_event(kind: str, position: int) -> Event:
    """The refusal of an event over MAX_EVENT_CHARS; its position in the document tells one from another (and a
    resend of the same document is refused again under the same key)."""
    return Event(kind[:40] or "unknown", error=(
        f"Event {position:,} of the document is over {MAX_EVENT_CHARS // 2**20} MiB of text (the limit of one "
        "event, about 150,000 units): nothing of it was applied; send its units in several events."))


def short_step(value: str) -> str:
    return _short(value, _STEP_PREFIXES)


def _short(value: str, prefixes) -> str:
    value = (value or "").strip()
    for prefix in prefixes:
        if value.startswith(prefix):
            return value[len(prefix):]
    return value


def _mda_name(attr_id: str) -> str:
    return _short(attr_id, _MDA)


def _date(value) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(str(value).strip()[:10])
    except ValueError:
        return None


def _time(value) -> datetime | None:
    text = (str(value or "")).strip()
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def open_document(data: bytes | BinaryIO) -> "DocumentReader":
    """The document's size and format, checked before anything in it is read."""
    source = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    size = source.seek(0, io.SEEK_END)
    if size > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"The document is {size:,} bytes; the limit is {MAX_DOCUMENT_BYTES:,}.")
    source.seek(0)
    head = source.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"<"):
        return DocumentReader(source, "xml")
    if head.startswith((b"{", b"[")):
        return DocumentReader(source, "json")
    raise DocumentError("The document is neither XML (EPCIS 1.2 / 2.0) nor JSON (EPCIS 2.0).")


def parse_document(data: bytes | BinaryIO) -> Document:
    reader = open_document(data)
    events = list(reader.events())
    return Document(reader.format, events, reader.products, reader.lot_expiry)


class DocumentReader:
    """A document read as a stream, as often as needed (each .events() starts from the beginning)."""

    def __init__(self, source: BinaryIO, format: str):
        self.source, self.format = source, format
        self.products: dict[str, dict] = {}
        self.lot_expiry: dict[tuple[str, str], date] = {}

    def events(self) -> Iterator[Event]:
        self.source.seek(0)
        return _xml_events(self, self.source) if self.format == "xml" else _json_events(self, self.source)


@functools.lru_cache(maxsize=1024)  # a document repeats a few dozen tags, millions of times in a large one
def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _child(el, name):
    for sub in el:
        if _local(sub.tag) == name:
            return sub
    return None


def _text(el, name) -> str:
    sub = _child(el, name)
    return (sub.text or "").strip() if sub is not None and sub.text else ""


def _find_all(el, name):
    return [sub for sub in el.iter() if _local(sub.tag) == name]


def _xml_events(doc: DocumentReader, source: BinaryIO) -> Iterator[Event]:
    open_elements, lists, position = [], 0, 0
    # The event or master-data element being read: its depth in the tree and the characters read of it (tags
    # and text). Past MAX_EVENT_CHARS its elements are dropped as they end, and it is refused whole.
    item_depth, size = None, 0
    try:
        # A bare <!DOCTYPE x> is harmless (GS1's own examples carry one); any entity declaration is refused.
        for action, el in xml_iterparse(source, events=("start", "end"), forbid_dtd=False, forbid_entities=True,
                                        forbid_external=True):
            if action == "start":
                if not open_elements and _local(el.tag) not in ("EPCISDocument", "EPCISQueryDocument"):
                    raise DocumentError(f"The XML document element is {_local(el.tag)!r}, not an EPCISDocument.")
                if item_depth is None and open_elements and (
                        _local(open_elements[-1].tag) == "EventList" or _local(el.tag) == "VocabularyElement"):
                    item_depth, size = len(open_elements), 0
                    position += _local(el.tag) != "VocabularyElement"
                open_elements.append(el)
                continue
            open_elements.pop()
            parent = open_elements[-1] if open_elements else None
            name = _local(el.tag)
            if item_depth is not None and len(open_elements) > item_depth:  # inside the item
                size += 2 * len(el.tag) + len(el.text or "") + len(el.tail or "") + 5
                if size > MAX_EVENT_CHARS:
                    parent.clear()  # refused whole anyway: what was kept of it goes, and what follows
                continue
            over, item_depth = size > MAX_EVENT_CHARS, None
            if parent is not None and _local(parent.tag) == "EventList":
                if over:
                    yield too_large_event(name, position)
                else:
                    yield from _xml_list_item(name, el)
                parent.clear()  # the event is read: drop it, so the tree never holds more than one
            elif name == "VocabularyElement":
                if over:
                    raise DocumentError(f"A master-data element is over {MAX_EVENT_CHARS // 2**20} MiB of text.")
                _master_xml(doc, el)
                el.clear()
            elif name == "EventList":
                lists += 1
    except DefusedXmlException as exc:
        raise DocumentError(f"The XML declares entities or external references, which are refused (XXE, entity "
                            f"expansion): {type(exc).__name__}.") from exc
    except XmlParseError as exc:
        raise DocumentError(f"The XML is malformed: {exc}.") from exc
    if not lists:
        raise DocumentError("The EPCIS document has no EventList.")


def _xml_list_item(name: str, el) -> Iterator[Event]:
    if name == "extension":  # EPCIS 1.2 puts TransformationEvent here: not read by the shelf
        for sub in el:
            yield Event(_local(sub.tag), error=f"{_local(sub.tag)} is not read by the shelf.")
        return
    try:
        yield _event_xml(name, el)
    except (TypeError, ValueError, AttributeError) as exc:
        yield Event(name[:40], error=f"The event could not be read: {str(exc)[:200]}.")


def _master_xml(doc: DocumentReader, element) -> None:
    attrs = {}
    for attr in element:
        if _local(attr.tag) == "attribute":
            attrs[_mda_name(attr.get("id", ""))] = (attr.text or "").strip()
    _master(doc, element.get("id", ""), attrs)


def _master(doc: DocumentReader, class_id: str, attrs: dict) -> None:
    lot_class = gs1.lgtin(class_id)
    if lot_class and attrs.get("itemExpirationDate"):
        expiry = _date(attrs["itemExpirationDate"])
        if expiry:
            doc.lot_expiry[lot_class] = expiry
    gtin = gs1.sgtin_pattern(class_id)
    if not gtin:
        return
    entry = doc.products.setdefault(gtin, {})
    code_type = attrs.get("additionalTradeItemIdentificationTypeCode", "")
    ndc = attrs.get("additionalTradeItemIdentification", "")
    if ndc and (not code_type or code_type.upper().startswith("FDA_NDC")):
        entry["ndc"] = ndc
    name = attrs.get("regulatedProductName") or attrs.get("drugName") or attrs.get("descriptionShort", "")
    if name:
        entry["name"] = name[:200]


def _event_xml(name: str, el) -> Event:
    event = Event(name)
    if name not in EVENT_TYPES:
        event.error = f"{name} is not an EPCIS event the shelf reads."
        return event
    event.event_id = _text(el, "eventID") or next((s.text.strip() for s in _find_all(el, "eventID") if s.text), "")
    event.event_time = _time(_text(el, "eventTime"))
    event.action = _text(el, "action")
    event.biz_step = short_step(_text(el, "bizStep"))
    event.disposition = _short(_text(el, "disposition"), _DISP_PREFIXES)
    event.parent = _text(el, "parentID")
    for list_name, target in (("epcList", event.epcs), ("childEPCs", event.children)):
        holder = _child(el, list_name)
        if holder is not None:
            target.extend((e.text or "").strip() for e in holder if _local(e.tag) == "epc")
    for bt in _find_all(el, "bizTransaction"):
        event.transactions.append((bt.text or "").strip())
    point, location = _child(el, "readPoint"), _child(el, "bizLocation")
    event.read_point = _text(point, "id") if point is not None else ""
    event.biz_location = _text(location, "id") if location is not None else ""
    for ilmd in _find_all(el, "ilmd"):
        for sub in ilmd:
            field_name = _local(sub.tag)
            if field_name == "lotNumber":
                event.lot = (sub.text or "").strip()
            elif field_name == "itemExpirationDate":
                event.expiry = _date(sub.text)
    if _find_all(el, "errorDeclaration"):
        event.error = ERROR_DECLARATION
    _check(event)
    return event


# --- JSON ---------------------------------------------------------------------------------------------


_EVENT_LISTS = (("epcisBody", "eventList"), ("epcisBody", "queryResults", "resultsBody", "eventList"))
_SINGLE_EVENT = ("epcisBody", "event")  # a single-event document (EPCIS 2.0 capture)
_VOCABULARY_ELEMENT = ("epcisHeader", "epcisMasterData", "vocabularyList", "*", "vocabularyElementList", "*")


def _json_wanted(path: tuple) -> bool:
    return (path == ("type",) or path == _SINGLE_EVENT or path == _VOCABULARY_ELEMENT
            or (path[-1:] == ("*",) and path[:-1] in _EVENT_LISTS))


def _json_events(doc: DocumentReader, source: BinaryIO) -> Iterator[Event]:
    kind, lists, position = None, 0, 0
    try:
        for path, value in JsonStream(source).values(_json_wanted, max_value_chars=MAX_EVENT_CHARS):
            if path == ("type",):
                kind = value
            elif value is ARRAY:
                lists += path in _EVENT_LISTS
            elif path == _VOCABULARY_ELEMENT:
                if value is TOO_LARGE:
                    raise DocumentError(f"A master-data element is over {MAX_EVENT_CHARS // 2**20} MiB of text.")
                _master_json(doc, value)
            elif value is TOO_LARGE:
                lists += path == _SINGLE_EVENT
                position += 1
                yield too_large_event("unknown", position)
            elif path != _SINGLE_EVENT or isinstance(value, dict):
                lists += path == _SINGLE_EVENT
                position += 1
                yield _event_json(value)
    except JsonStreamError as exc:
        raise DocumentError(str(exc)) from exc
    if kind not in ("EPCISDocument", "EPCISQueryDocument"):
        raise DocumentError("The JSON is not an EPCIS 2.0 document (type EPCISDocument or EPCISQueryDocument).")
    if not lists:
        raise DocumentError("The EPCIS document has no epcisBody.eventList.")


def _master_json(doc: DocumentReader, element) -> None:
    if not isinstance(element, dict):
        return
    attrs, attributes = {}, element.get("attributes")
    for attr in attributes if isinstance(attributes, list) else []:
        if isinstance(attr, dict):
            attrs[_mda_name(str(attr.get("id", "")))] = str(attr.get("attribute", "")).strip()
    _master(doc, str(element.get("id", "")), attrs)


def _epc_list(value) -> list[str]:
    return [str(v).strip() for v in value] if isinstance(value, list) else []


def _event_json(raw) -> Event:
    try:
        return _read_event_json(raw)
    except (TypeError, ValueError, AttributeError) as exc:  # a field of an unexpected JSON type
        kind = raw.get("type") if isinstance(raw, dict) else None
        return Event(str(kind or "unknown")[:40], error=f"The event could not be read: {str(exc)[:200]}.")


def _read_event_json(raw) -> Event:
    if not isinstance(raw, dict):
        return Event("unknown", error="An event is not a JSON object.")
    kind = str(raw.get("type", ""))
    event = Event(kind or "unknown")
    if kind not in EVENT_TYPES:
        event.error = f"{kind or 'An event without a type'} is not an EPCIS event the shelf reads."
        return event
    event.event_id = str(raw.get("eventID") or "")
    event.event_time = _time(raw.get("eventTime"))
    event.action = str(raw.get("action") or "")
    event.biz_step = short_step(str(raw.get("bizStep") or ""))
    event.disposition = _short(str(raw.get("disposition") or ""), _DISP_PREFIXES)
    event.epcs = _epc_list(raw.get("epcList"))
    event.parent = str(raw.get("parentID") or "")
    event.children = _epc_list(raw.get("childEPCs"))
    event.transactions = [str(t.get("bizTransaction", "")) for t in raw.get("bizTransactionList") or []
                          if isinstance(t, dict)]
    for name, target in (("readPoint", "read_point"), ("bizLocation", "biz_location")):
        value = raw.get(name)
        if isinstance(value, dict):
            setattr(event, target, str(value.get("id", "")))
    ilmd = raw.get("ilmd")
    if isinstance(ilmd, dict):
        for key, value in ilmd.items():
            name = _mda_name(key)
            if name == "lotNumber":
                event.lot = str(value).strip()
            elif name == "itemExpirationDate":
                event.expiry = _date(value)
    if raw.get("errorDeclaration"):
        event.error = ERROR_DECLARATION
    _check(event)
    return event


def _check(event: Event) -> None:
    """What the shelf needs of an event; anything else makes it refused with the reason."""
    if event.error:
        return
    if event.event_time is None:
        event.error = "The event has no eventTime with a time zone."
    elif event.action not in ("ADD", "OBSERVE", "DELETE"):
        event.error = f"The event's action {event.action!r} is not ADD, OBSERVE or DELETE."
    elif event.type == "AggregationEvent" and not event.parent and event.action != "OBSERVE":
        event.error = "An AggregationEvent with action ADD or DELETE must name its parentID."
    elif len(event.lot) > gs1.LOT_CHARS:
        event.error = gs1.too_long("lot", event.lot, gs1.LOT_CHARS, "10")
    elif not (event.epcs or event.children or event.parent):
        event.error = "The event names no EPCs (class-level quantities are not read by the shelf)."
    else:
        event.error = _identifier_error(event)


def _identifier_error(event: Event) -> str:
    """Every identifier is read whole or the event is refused: the same bounds whatever the form it came in."""
    for name, value in (("eventID", event.event_id), ("bizLocation", event.biz_location),
                        ("readPoint", event.read_point), *(("bizTransaction", t) for t in event.transactions)):
        if len(value) > MAX_EVENT_ID_CHARS:
            return f"The {name} {value[:60]!r}... is {len(value)} characters; the limit is {MAX_EVENT_ID_CHARS}."
    for uri in [*event.epcs, *event.children, *([event.parent] if event.parent else [])]:
        reason = gs1.epc_refusal(uri)
        if reason:
            return reason
    return ""
