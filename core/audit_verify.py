"""Verification of the audit chain (core.audit_chain): reads only, never seals.

    verify_chain() -> Verification     the first failure found, naming the link, the table and the row

Every link is recomputed in order with the key it names (a retired key still verifies the links it
signed). A chain verifies when:
- links run 1, 2, 3 ... with no gap, and the head names the last one (a deleted link, or links deleted
  from the end, are found);
- each link's event exists, carries the link's seq, and its structure (action, actor id and label,
  time, rows) gives the stored link hash after the previous link: an edit, a reorder, a link forged or
  computed without the key is found at that link;
- each event not redacted still gives the link's digest of its redactable part (before/after, notes,
  details): an edit of a contact log, a quarantine count or a dispensing change is found;
- each redacted event is named by an erasure event of the chain;
- every head written to the anchor file (UNSAY_AUDIT_ANCHOR_FILE, core.audit_anchor) is still a link of
  the chain with the same hash;
- no event is outside the chain: one with no seq (inserted by hand, or left by a writer that died
  between its commit and its seal - `manage.py seal_audit` links those after an operator has looked at
  them), or one whose seq no link names.
"""

from collections import Counter
from dataclasses import dataclass, field

from django.conf import settings

from core.audit_anchor import anchor_failure
from core.audit_chain import (
    CHAIN_START,
    chained_models,
    head,
    link_hash,
    redactable_digest,
    structure_of,
    verifying_key,
)
from core.models import AuditLink


@dataclass
class Verification:
    links: int = 0
    seq: int | None = None
    table: str = ""
    row_id: int | None = None
    reason: str = ""
    unsealed: int = 0

    @property
    def ok(self) -> bool:
        return not self.reason

    def describe(self) -> str:
        where = f"link {self.seq}" if self.seq is not None else "outside the chain" if self.table else "its anchor"
        row = f" ({self.table} row {self.row_id})" if self.table else ""
        return f"{where}{row}: {self.reason}"

    def _broken(self, seq, table, row_id, reason) -> "Verification":
        self.seq, self.table, self.row_id, self.reason = seq, table, row_id, reason
        return self


@dataclass
class _Seen:
    """What the walk saw that is checked once it ends."""

    linked: Counter = field(default_factory=Counter)  # links per table
    redacted: dict = field(default_factory=dict)  # (table, row id) -> seq of redacted events
    named_by_erasures: set = field(default_factory=set)  # (table, row id) an erasure says it redacted


def _events_of(models, links) -> dict:
    ids: dict[str, list[int]] = {}
    for link in links:
        ids.setdefault(link.event_table, []).append(link.event_id)
    return {(table, e.pk): e for table, pks in ids.items() if table in models
            for e in models[table].objects.filter(pk__in=pks)}


def _why_broken(link, event, previous: str, models) -> str:
    if link.event_table not in models:
        return f"it names table {link.event_table}, which holds no audited events"
    key = verifying_key(link.key_id)
    if key is None:
        return (f"it is signed with key {link.key_id!r}, which this deployment does not hold "
                "(a retired key belongs in UNSAY_AUDIT_RETIRED_KEYS)")
    if event is None:
        return "the event it seals is missing (deleted)"
    if event.seq != link.seq:
        return f"the event carries seq {event.seq}, not this link's (events were moved or reordered)"
    expected = link_hash(key, previous=previous, seq=link.seq, key_id=link.key_id, table=link.event_table,
                         row_id=event.pk, structure=structure_of(event, event.CHAIN_STRUCTURE),
                         redactable=link.redactable_digest)
    if expected != link.link_hash:
        return ("the link does not verify: the event's " + ", ".join(event.CHAIN_STRUCTURE) + " were changed "
                "after it was sealed, or the link was forged, moved or computed without the key")
    if not event.redacted and redactable_digest(key, event, event.CHAIN_REDACTABLE) != link.redactable_digest:
        return f"the event's {', '.join(event.CHAIN_REDACTABLE)} were changed after it was sealed"
    return ""


def verify_chain(*, batch: int = 5000) -> Verification:
    models = chained_models()
    result = Verification()
    previous, expected = CHAIN_START, 1
    seen = _Seen()
    after = 0
    while True:
        links = list(AuditLink.objects.filter(seq__gt=after).order_by("seq")[:batch])
        if not links:
            break
        events = _events_of(models, links)
        for link in links:
            if link.seq != expected:
                return _missing_link(result, models, expected, link)
            event = events.get((link.event_table, link.event_id))
            why = _why_broken(link, event, previous, models)
            if why:
                return result._broken(link.seq, link.event_table, link.event_id, why)
            result.links += 1
            seen.linked[link.event_table] += 1
            if event.redacted:
                seen.redacted[(link.event_table, event.pk)] = link.seq
            seen.named_by_erasures.update((table, pk) for table, pks in event.chain_redactions().items() for pk in pks)
            previous, expected = link.link_hash, link.seq + 1
        after = links[-1].seq
    return _check_the_rest(result, models, seen, expected - 1, previous)


def _missing_link(result, models, seq, next_link) -> Verification:
    """Link `seq` was deleted: named with the event that still carries its position, if any."""
    for table, model in sorted(models.items()):
        orphan = model.objects.filter(seq=seq).first()
        if orphan is not None:
            return result._broken(seq, table, orphan.pk, f"link {seq} of this event is missing (deleted)")
    return result._broken(seq, "", None, f"link {seq} and its event are missing (the next stored link is "
                                         f"{next_link.seq}, {next_link.event_table} row {next_link.event_id})")


def _check_the_rest(result, models, seen: _Seen, last_seq: int, last_link: str) -> Verification:
    head_seq, head_link = head()
    if (head_seq, head_link) != (last_seq, last_link):
        return result._broken(last_seq + 1, "", None, f"the chain head says link {head_seq} but the stored chain "
                                                      f"ends at link {last_seq}: links were deleted from its end")
    if settings.UNSAY_AUDIT_ANCHOR_FILE and (why := anchor_failure(settings.UNSAY_AUDIT_ANCHOR_FILE)):
        return result._broken(None, "", None, why)
    for table, model in sorted(models.items()):
        outside = model.objects.filter(seq__isnull=True)
        result.unsealed += outside.count()
        first = outside.order_by("pk").first()
        if first is not None and result.ok:
            result._broken(None, table, first.pk, "the event is not in the chain (no link seals it: written by "
                                                  "hand, or its writer stopped before sealing it; check it, "
                                                  "then `manage.py seal_audit` links such events)")
        if result.ok and model.objects.filter(seq__isnull=False).count() != seen.linked[table]:
            stray = (model.objects.filter(seq__isnull=False)
                     .exclude(pk__in=AuditLink.objects.filter(event_table=table).values("event_id")).order_by("pk")
                     .first())
            result._broken(None, table, stray.pk if stray else None,
                           f"the event carries seq {stray.seq if stray else '?'} but no link seals it (forged)")
    unexplained = sorted((seq, key) for key, seq in seen.redacted.items() if key not in seen.named_by_erasures)
    if unexplained and result.ok:
        seq, (table, pk) = unexplained[0]
        result._broken(seq, table, pk, "the event is marked redacted but no erasure names it")
    return result
