"""Receiving an EPCIS document at a site: the one write path for units from EPCIS.

    receive(data, *, site, source="", actor="") -> Receipt

One transaction: the units' rows, the events (applied or refused, with reasons), aggregations and one
audit row; after commit, units of a lot or product already under recall join that recall's shelf task
(shelf.quarantine.match_units). Re-sending a document changes nothing: an event already applied at the
site (same eventID, or same content hash) is skipped. A refused event takes no key: sent again it is read
again, so a corrected resend under the same eventID lands, and the same content is refused again.

The document is streamed (shelf.epcis.open_document), never held whole: read once through to the end
(checked, master data, packing, lots noted), then applied a chunk of events at a time. An event over
shelf.epcis.MAX_EVENT_CHARS is refused whole without being kept; lots noted for millions of units move to a
temporary file (shelf.lot_notes): memory has a bound for any document the size limit allows.

What each event does to the units it names (a case, by SSCC or parent EPC, stands for the units packed in it,
from AggregationEvents of this document or of earlier ones):

| bizStep | unit not known at the site | unit known |
|---|---|---|
| receiving, and a supplier's shipping (the DSCSA notice of what it sent us) | on hand | (returned ->) on hand |
| shipping of a unit we hold (a return to the supplier) | - | on hand -> returned |
| dispensing | dispensed | on hand -> dispensed |
| decommissioning, destroying | destroyed | on hand -> destroyed |
| commissioning (and other steps) | lot and expiry noted for later events | lot / expiry filled in |

Every move is checked against shelf.transitions.UNIT and written by shelf.transitions.move_units. An event that
would break a rule there (shipping, dispensing or destroying a quarantined unit: only a pharmacist's return with
the count takes it out of quarantine; destroying a dispensed unit; dispensing a returned or destroyed one) is
refused with the reason, nothing of it applied; the document's other events land.

AggregationEvent with ADD records case -> units (packing); its own receiving / shipping step moves the
units too. TransactionEvent moves units by its bizStep like an ObjectEvent.
"""

from dataclasses import dataclass, field
from typing import BinaryIO

from django.db import connection, transaction
from django.utils import timezone

from core.copy_rows import insert_rows
from drugs import gs1
from drugs.gs1 import ndc_candidates
from drugs.lots import canonical_lot, printed_lot
from drugs.ndc import normalize_ndc
from memory.models import Fact
from patients.models import DispensingRecord

from .epcis import DocumentError, DocumentReader, Event, open_document
from .lot_notes import LotNotes
from .models import Aggregation, ReceivedEvent, ShelfEvent, Unit
from .quarantine import match_units
from .transitions import NEW_UNIT_COLUMNS, By, move_units, why_not

MOVING_STEPS = {"receiving", "shipping", "dispensing", "decommissioning", "destroying"}
CHUNK = 5000  # events, or units named, whichever comes first
# The refusals a receipt lists (all of them are kept as ReceivedEvent rows with their reasons).
REFUSALS_LISTED = 10_000


@dataclass
class Receipt:
    site: str
    applied: int = 0
    skipped: int = 0  # already received (idempotent re-send)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (event key, reason): the first REFUSALS_LISTED
    refused_total: int = 0
    units_new: int = 0
    units_changed: int = 0
    error: str = ""  # the document as a whole was refused

    @property
    def ok(self) -> bool:
        return not self.error

    def as_dict(self) -> dict:
        return {"site": self.site, "applied": self.applied, "skipped": self.skipped,
                "refused": [{"event": k, "reason": r} for k, r in self.refused], "refused_total": self.refused_total,
                "units_new": self.units_new, "units_changed": self.units_changed, "error": self.error}


class _Products:
    """GTIN -> (NDC-11 or "", candidate NDC products). The GTIN's 10 NDC digits can be hyphenated three
    ways; master data that names the NDC decides, else the one candidate product a recall or a dispensing
    row knows; otherwise every candidate is kept and matching tries each."""

    def __init__(self, doc: DocumentReader):
        self.doc, self.cache = doc, {}

    def __call__(self, gtin: str) -> tuple[str, list[str]] | None:
        if gtin not in self.cache:
            self.cache[gtin] = self._resolve(gtin)
        return self.cache[gtin]

    def _resolve(self, gtin: str):
        candidates = ndc_candidates(gtin)
        if not candidates:
            return None
        by_ndc = {c.ndc11: c for c in candidates}
        sent = (self.doc.products.get(gtin) or {}).get("ndc", "")
        if sent:
            for form in (sent, sent.replace(" ", "")):
                try:
                    ndc = normalize_ndc(form)
                except ValueError:
                    continue
                if ndc in by_ndc:
                    return ndc, [ndc[:10]]
        products = [c.product for c in candidates]
        known = set(DispensingRecord.objects.filter(ndc_product__in=products)
                    .values_list("ndc_product", flat=True).distinct())
        for product in products:
            if Fact.objects.filter(kind=Fact.Kind.RECALL, retracted_at__isnull=True,
                                   attributes__ndc_products__contains=[product]).exists():
                known.add(product)
        if len(known) == 1:
            (product,) = known
            return next(c.ndc11 for c in candidates if c.product == product), [product]
        return "", products


def receive(data: bytes | BinaryIO, *, site: str, source: str = "", actor: str = "") -> Receipt:
    """Receive a document given as bytes or as a binary file (read as a stream, twice: never held whole)."""
    receipt = Receipt(site=site)
    if not site or len(site) > 200 or "\x00" in site:
        receipt.error = "A site (1 to 200 characters) is required."
        return receipt
    try:
        return receive_document(open_document(data), site=site, source=source, actor=actor, receipt=receipt)
    except DocumentError as exc:  # found before anything was written, or while reading (all of it rolled back)
        return Receipt(site=site, error=str(exc))


def _expand(uri: str, children: dict[str, list[str]], seen=None) -> list[str]:
    """The SGTINs a URI stands for: itself, or a case's contents (cases in cases), read from `children`."""
    if gs1.sgtin(uri) and uri not in children:
        return [uri]
    seen = seen or set()
    if uri in seen:
        return []
    seen.add(uri)
    out = []
    for child in children.get(uri, []):
        out.extend(_expand(child, children, seen))
    return out


def receive_document(doc: DocumentReader, *, site: str, source: str = "", actor: str = "",
                     receipt: Receipt | None = None) -> Receipt:
    """The document is read twice, a chunk of events at a time: first through to the end (the whole document
    checked before anything is applied, master data, packing, lots noted by commissioning anywhere in it),
    then applied CHUNK events (or units) at a time, each chunk's rows written before the next is read. Memory
    follows a chunk, not the document (lots noted for later events move to disk past LotNotes.IN_MEMORY)."""
    receiving = _Receiving(doc, site, source, receipt or Receipt(site=site))
    with receiving.noted, transaction.atomic():
        if connection.vendor == "postgresql":
            # One receipt at a time per site: two copies of a document sent at once must not both pass the
            # "already received?" check and then collide on the event key.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"shelf.receive:{site}"])
        receiving.read_through()
        chunk, units = [], 0
        for event in doc.events():
            chunk.append(event)
            units += len(event.epcs) + len(event.children)
            if len(chunk) == CHUNK or units >= CHUNK:
                receiving.apply(chunk)
                chunk, units = [], 0
        receiving.apply(chunk)
        receipt = receiving.receipt
        ShelfEvent.objects.create(actor_label=(actor or "epcis")[:150], action=ShelfEvent.Action.RECEIVED,
                                  site=site, details={"source": source[:300], **{
                                      k: v for k, v in receipt.as_dict().items() if k != "refused"},
                                      "refused": receipt.refused_total})
        if receiving.lots or receiving.ndc_products:
            lots, products = receiving.lots, receiving.ndc_products
            transaction.on_commit(lambda: match_units(site, lots, products))
    return receipt


class _Receiving:
    """One document being received at a site: what the first reading noted, and what the chunks did."""

    def __init__(self, doc: DocumentReader, site: str, source: str, receipt: Receipt):
        self.doc, self.site, self.source, self.receipt = doc, site, source, receipt
        self.now = timezone.now()
        self.products = _Products(doc)
        self.noted = LotNotes()  # unit URI -> (lot, expiry) from commissioning ILMD
        self.parents: set[str] = set()  # cases (and parent SGTINs) this document packs
        self.lots: set[str] = set()
        self.ndc_products: set[str] = set()

    def read_through(self) -> None:
        """The first reading: every event parsed (a malformed document raises here, before anything is applied),
        master data gathered, packing recorded, lots noted."""
        packs = []
        for event in self.doc.events():
            if event.error:
                continue
            if event.lot:
                self.noted.note([*event.epcs, *event.children], event.lot, event.expiry)
            if event.type == "AggregationEvent" and event.action == "ADD":
                self.parents.add(event.parent)
                packs.extend(Aggregation(site=self.site, parent=event.parent, child=c) for c in event.children)
                if len(packs) >= CHUNK:
                    Aggregation.objects.bulk_create(packs, ignore_conflicts=True)
                    packs = []
        Aggregation.objects.bulk_create(packs, batch_size=CHUNK, ignore_conflicts=True)

    def _applied_keys(self, keys: list[str]) -> set[str]:
        with connection.cursor() as cursor:  # one array parameter, not 5,000 placeholders
            # Only an applied event takes its key: a refused one is read again (a corrected resend lands).
            cursor.execute(f"SELECT event_key FROM {ReceivedEvent._meta.db_table} WHERE site = %s "
                           "AND status = %s AND event_key = ANY(%s)", [self.site, ReceivedEvent.Status.APPLIED, keys])
            return {row[0] for row in cursor.fetchall()}

    def _children(self, events: list[Event]) -> dict[str, list[str]]:
        """Case -> contents for the cases these events name (cases in cases too), from the packing recorded by
        this document's first reading and by earlier documents."""
        children: dict[str, list[str]] = {}
        wanted = {u for e in events if not e.error for u in [*e.epcs, *e.children, e.parent]
                  if u and (u in self.parents or not gs1.sgtin(u))}
        table = Aggregation._meta.db_table
        while wanted:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT parent, child FROM {table} WHERE site = %s AND parent = ANY(%s)",
                               [self.site, sorted(wanted)])
                rows = cursor.fetchall()
            for parent in wanted:
                children.setdefault(parent, [])
            for parent, child in rows:
                children[parent].append(child)
            wanted = {c for _, c in rows if c not in children and (c in self.parents or not gs1.sgtin(c))}
        return {parent: kids for parent, kids in children.items() if kids}

    def apply(self, events: list[Event]) -> None:
        """One chunk of events, in document order: skipped when already applied, else applied or refused."""
        if not events:
            return
        receipt, site, now = self.receipt, self.site, self.now
        known_keys = self._applied_keys([e.key for e in events])
        todo = []
        for event in events:
            if event.key in known_keys:
                receipt.skipped += 1
            else:
                todo.append(event)
        children = self._children(todo)
        named = {u for e in todo if not e.error for uri in [*e.epcs, *e.children, e.parent] if uri
                 for u in _expand(uri, children)}
        ids = {uri: gs1.sgtin(uri) for uri in named}
        chunk = _Chunk(children, ids, _load_units(site, [v for v in ids.values() if v]), self.noted.get_many(named))
        before = {key: unit.changed_at for key, unit in chunk.units.items()}
        records, applied_keys = [], set()
        for event in todo:
            if event.key in applied_keys:  # the same event twice in one chunk
                receipt.skipped += 1
                continue
            reason = event.error or self._apply(event, chunk)
            records.append((  # the columns of _EVENT_FIELDS
                site, event.key, event.type[:40], event.action[:10], event.biz_step[:60], event.event_time,
                ReceivedEvent.Status.REFUSED if reason else ReceivedEvent.Status.APPLIED, reason or "",
                0 if reason else len(event.epcs) + len(event.children), self.source[:300], now))
            if reason:
                receipt.refused_total += 1
                if len(receipt.refused) < REFUSALS_LISTED:
                    receipt.refused.append((event.key, reason))
            else:
                receipt.applied += 1
                applied_keys.add(event.key)
        for state, units in _by_state(chunk.new_units.values(), chunk.planned).items():
            move_units(units, state, by=By.EPCIS)
        changed_existing = [u for u in chunk.changed.values() if u.pk]
        filled = [u for u in changed_existing if (u.gtin, u.serial) in chunk.filled]
        if filled:
            Unit.objects.bulk_update(filled, ["lot", "lot_printed", "expiry"], batch_size=CHUNK)
        moving = [u for u in changed_existing if chunk.planned[(u.gtin, u.serial)] != u.state]
        for state, units in _by_state(moving, chunk.planned).items():
            move_units(units, state, by=By.EPCIS, changed_at=now)
        insert_rows(ReceivedEvent, _EVENT_FIELDS, records, batch_size=CHUNK)
        receipt.units_new += len(chunk.new_units)
        # A unit first changed by an earlier chunk of this document is counted once.
        receipt.units_changed += sum(1 for u in changed_existing if before[(u.gtin, u.serial)] != now)
        for unit in [*chunk.new_units.values(), *changed_existing]:
            self.lots.add(unit.lot)
            self.ndc_products.update(unit.ndc_products)

    def _apply(self, event: Event, chunk: "_Chunk") -> str:
        """Apply one event to the in-memory units; a reason when the event is refused (nothing of it applied)."""
        site, now, doc = self.site, self.now, self.doc
        children, ids = chunk.children, chunk.ids
        units, new_units, changed, noted = chunk.units, chunk.new_units, chunk.changed, chunk.noted
        step = event.biz_step
        moving = step in MOVING_STEPS and event.action in ("ADD", "OBSERVE")
        if event.type == "AggregationEvent" and not moving:
            return ""  # packing / unpacking: recorded as aggregations by the first reading
        uris = [*event.epcs, *event.children] or ([event.parent] if event.parent else [])
        sgtins = [u for uri in uris for u in _expand(uri, children)]
        if moving and not sgtins:
            return "The event names cases whose contents are unknown (no AggregationEvent packs them)."
        planned = []
        for uri in sgtins:
            gtin, serial = ids[uri]
            resolved = self.products(gtin)
            if resolved is None:
                return f"GTIN {gtin} is not a US drug GTIN (no NDC in it): the event is kept refused for review."
            planned.append((uri, gtin, serial, resolved))
        if moving:
            # Every move of the event is checked before any is made: a refused event changes nothing.
            for _uri, gtin, serial, _resolved in planned:
                unit = units.get((gtin, serial))
                if unit is not None:
                    state = chunk.planned[(gtin, serial)]
                    if reason := why_not(unit, _next_state(step, state), By.EPCIS, state=state):
                        return reason
        for uri, gtin, serial, (ndc, candidates) in planned:
            key = (gtin, serial)
            unit = units.get(key)
            lot, expiry = (event.lot, event.expiry) if event.lot else noted.get(uri, ("", None))
            if expiry is None and lot:
                expiry = doc.lot_expiry.get((gtin, lot))
            if unit is None:
                if not moving:
                    continue
                unit = _NewUnit(site, gtin, serial, ndc, candidates, canonical_lot(lot), printed_lot(lot)[:100],
                                expiry, (doc.products.get(gtin) or {}).get("name", "")[:200],
                                event.event_time or now, now)
                units[key] = new_units[key] = unit
                chunk.planned[key] = _new_state(step)
                continue
            filled = False
            if lot and not unit.lot:
                unit.lot, unit.lot_printed, filled = canonical_lot(lot), printed_lot(lot)[:100], True
            if expiry and not unit.expiry:
                unit.expiry, filled = expiry, True
            if filled:
                chunk.filled.add(key)
            if moving:
                chunk.planned[key] = _next_state(step, chunk.planned[key])
            if key not in new_units and (filled or chunk.planned[key] != unit.state):
                changed[key] = unit
        return ""


@dataclass
class _Chunk:
    """What one chunk of events reads and writes: its cases' contents, its units by SGTIN, loaded once."""

    children: dict[str, list[str]]
    ids: dict[str, tuple[str, str] | None]
    units: dict[tuple[str, str], object]
    noted: dict[str, tuple]  # unit URI -> (lot, expiry) the document's commissioning noted, for these units
    new_units: dict = field(default_factory=dict)
    changed: dict = field(default_factory=dict)
    planned: dict = field(default_factory=dict)  # SGTIN -> the state the chunk's events so far leave it in
    filled: set = field(default_factory=set)      # SGTINs whose lot or expiry an event filled in

    def __post_init__(self):
        self.planned.update({key: unit.state for key, unit in self.units.items()})


_EVENT_FIELDS = ["site", "event_key", "event_type", "action", "biz_step", "event_time", "status", "reason", "units",
                 "source", "received_at"]


class _NewUnit:
    """A unit first seen in this document, before its row exists: the columns COPY writes, nothing more
    (a model instance costs more to build than the row costs to insert). Its state is the chunk's plan,
    written by shelf.transitions.move_units."""

    __slots__ = NEW_UNIT_COLUMNS
    pk = None

    def __init__(self, site, gtin, serial, ndc, ndc_products, lot, lot_printed, expiry, product_name,
                 received_at, changed_at):
        self.site, self.gtin, self.serial, self.ndc, self.ndc_products = site, gtin, serial, ndc, ndc_products
        self.lot, self.lot_printed, self.expiry, self.product_name = lot, lot_printed, expiry, product_name
        self.received_at, self.changed_at = received_at, changed_at


def _by_state(units, planned: dict) -> dict[str, list]:
    grouped: dict[str, list] = {}
    for unit in units:
        grouped.setdefault(planned[(unit.gtin, unit.serial)], []).append(unit)
    return grouped


def _load_units(site: str, sgtins: list[tuple[str, str]]) -> dict[tuple[str, str], Unit]:
    out = {}
    serials = sorted({s for _, s in sgtins})
    wanted = set(sgtins)
    table = Unit._meta.db_table
    # Locked: a scan at fill or a pharmacist's confirmation waits for the receipt, so each move is checked
    # against the state it is written from (in id order, as every writer of units locks them).
    for unit in Unit.objects.raw(f"SELECT * FROM {table} WHERE site = %s AND serial = ANY(%s) ORDER BY id FOR UPDATE",
                                 [site, serials]):
        if (unit.gtin, unit.serial) in wanted:
            out[(unit.gtin, unit.serial)] = unit
    return out


def _new_state(step: str) -> str:
    return {"receiving": Unit.State.ON_HAND, "shipping": Unit.State.ON_HAND, "dispensing": Unit.State.DISPENSED,
            "decommissioning": Unit.State.DESTROYED, "destroying": Unit.State.DESTROYED}[step]


def _next_state(step: str, state: str) -> str:
    if step == "receiving":
        return Unit.State.ON_HAND if state == Unit.State.RETURNED else state
    if step == "shipping":
        return Unit.State.RETURNED if state in (Unit.State.ON_HAND, Unit.State.QUARANTINED) else state
    if step == "dispensing":
        return Unit.State.DISPENSED
    return Unit.State.DESTROYED

