"""The sweep's set-based page: the normal path for the rules reasoner on PostgreSQL.

One locked page of the stale set (corrections.sweep._process_page has already read its decisions,
their stale reasons and pending drafts) is handled in two steps inside the page's one transaction:

  plan_page   read the page's dispensing and candidate believed facts in a few queries
              (ask.beliefs.PageBeliefs), then decide every decision in memory through the same
              ask.services.decide the ask path uses, and work out each decision's letter exactly as
              corrections.redecide.redecide does (trigger, dedupe key, coalescing);
  write_page  supersede the page's decisions in one UPDATE guarded by status = 'standing'
              (memory.services.supersede_standing; the row count must be the page's size),
              take ids with nextval over generate_series, store the page's read sets not stored yet
              (memory.read_sets.store), and COPY decisions, premises, inputs, corrections, outbox
              messages, audit events and redecisions.

The rows are the ones the per-decision path writes, ids included (tests/corrections/test_sweep_set_based.py),
because ids are taken per table in the same order. Anything unusual raises or is refused up front
(`per_decision_reason`): the caller rolls the savepoint back and runs the per-decision path for
that page — an integrity error (a dedupe key taken by a concurrent sweep), a decision no longer
standing, a pending draft to stale, a model reasoner, an engine other than PostgreSQL.

Decisions are decided once per group that the rules cannot tell apart (PageDecider: equal inputs
up to lots no believed fact names), and once per sweep while its pages load the same fact versions
(SweepGroups), which is what makes pages of distinct patients cheap.

A draft's values (key, recipient, subject, classification, audit before/after) come from
corrections.drafts, the functions the per-decision path saves through the ORM.
"""

import json
import logging
import uuid
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

from django.conf import settings
from django.db import connection
from django.utils import timezone

from ask.beliefs import FactCache, PageBeliefs
from ask.reasoners import get_reasoner
from ask.rules import date_view, reads_dates
from core import audit_chain
from memory import read_sets
from memory.models import Decision, DecisionInput, DecisionPremise
from memory.services import supersede_standing
from recalls.selectors import prefetch as prefetch_texts

from .drafting import correction_text, fact_diff, serious_answer
from .drafts import SWEEP_ACTOR, coalesce, correction_values, draft_key, drafted_event, message_values
from .models import AuditEvent, Correction, OutboxMessage, Redecision
from .redecide import SweepReport, change_token, letter_fact, pick_trigger, strongest_match

log = logging.getLogger(__name__)


class PageFallback(Exception):
    """This page must go the per-decision way (the savepoint is rolled back first)."""


def per_decision_reason(decider, decisions, pending, *, dry_run: bool) -> str:
    """Why this page cannot take the set-based path ("" when it can)."""
    if dry_run:
        return "dry run"
    if not settings.UNSAY_SWEEP_SET_BASED:
        return "UNSAY_SWEEP_SET_BASED=0"
    if connection.vendor != "postgresql":
        return f"engine {connection.vendor}"
    if pending:
        return "pending drafts to stale"
    if get_reasoner(decider.reasoner).uses_model:
        return "model reasoner"
    if any(d.patient_id is None for d in decisions):
        return "decision without a patient"
    return ""


@dataclass
class Plan:
    decision: Decision
    outcome: object
    shared: bool
    trigger: object
    previous: object
    recall_number: str
    changed: bool
    key: str
    coalesced: bool = False
    group: tuple | None = None  # PageDecider's group (its match classes are shared)
    dispensing_changed: bool = False  # no fact changed: the letter says our record of the medicine did


def plan_page(decisions, reasons, decider, *, fact_cache: FactCache,
              groups: "SweepGroups | None" = None) -> tuple[list[Plan], PageBeliefs]:
    """Decide the page in memory. Reads: dispensing (1 query), believed fact ids (1), fact rows not
    cached yet (0-1), the latest version of each retracted read (per page), semantic neighbours
    per distinct question when the exact matches leave room, and the dedupe keys (1)."""
    from ask.services import resolve_subject

    beliefs = PageBeliefs({d.patient_id for d in decisions}, cache=fact_cache)
    decider.preload_from(beliefs)
    wanted, resolved_for = [], {}
    for d in decisions:
        drugs = tuple(beliefs.patient_drugs(d.patient))
        key = (d.question, d.subject or "", drugs)
        if key not in resolved_for:
            resolved_for[key] = resolve_subject(d.patient, d.question, d.subject or None, beliefs=beliefs)[0]
        wanted.append((d.patient_id, resolved_for[key]))
    beliefs.load_facts(wanted)
    grouped = PageDecider(decider, beliefs, shared=groups)
    latest: dict = {}
    plans = []
    for d in decisions:
        previous, trigger = pick_trigger(reasons[d.id], latest)
        outcome, shared, group = grouped.decide(d.patient, d.question, d.subject)
        token = change_token(trigger, previous, outcome)
        trigger, dispensing_changed = letter_fact(trigger, previous, outcome)
        cause = trigger or previous
        recall_number = (cause.attributes or {}).get("recall_number", "") if cause else ""
        changed = outcome.verdict != d.verdict
        key = draft_key(d.patient_id, d.subject, outcome.verdict, token)
        plans.append(Plan(d, outcome, shared, trigger, previous, recall_number, changed, key,
                          group=group if d.subject and d.subject == outcome.subject else None,
                          dispensing_changed=dispensing_changed))
    prefetch_texts([f for p in plans for f in (p.trigger, p.previous)])  # the page's letters read them: one query
    # Coalescing, in page order, as the per-decision path (corrections.drafts.coalesce).
    keys = sorted({p.key for p in plans if p.changed})
    existing = {}
    if keys:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT dedupe_key, status FROM {Correction._meta.db_table} WHERE dedupe_key = ANY(%s)",
                           [keys])
            existing = dict(cursor.fetchall())
    drafted: set[str] = set()
    for p in plans:
        if p.changed:
            earlier = None if p.key in drafted else existing.get(p.key)
            p.key, p.coalesced = coalesce(p.key, earlier, drafted, p.decision.id)
            drafted.add(p.key)
    beliefs.grouped = grouped
    return plans, beliefs


def _copy(cursor, model, columns, rows: list[tuple]):
    if not rows:
        return
    table = model._meta.db_table
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _columns(model, *, with_id: bool) -> list[str]:
    return [f.column for f in model._meta.concrete_fields if with_id or not f.primary_key]


# The columns each COPY names, in the order its row tuples are built below. `_checked_columns`
# refuses to COPY when a table's concrete columns are not exactly these (a new model field is
# never silently defaulted).
DECISION_COLUMNS = ("id", "public_id", "patient_id", "region", "question", "subject", "verdict", "answer",
                    "reasoner", "reasoner_verdict", "guardrail_override", "inputs_hash", "status", "replaces_id",
                    "decided_at", "superseded_at", "created", "read_set_id")
PREMISE_COLUMNS = ("decision_id", "scope")
INPUT_COLUMNS = ("decision_id", "dispensing_id", "fingerprint")
CORRECTION_COLUMNS = ("id", "public_id", "kind", "status", "patient_id", "region", "match", "match_class",
                      "recall_number", "classification", "severity", "old_decision_id", "new_decision_id",
                      "old_verdict", "old_answer", "new_verdict", "new_answer", "trigger_fact_id", "previous_fact_id",
                      "diff", "matched_lots", "drafted_text", "final_text", "dedupe_key", "sweep_run_id", "replaces_id",
                      "reviewed_by_id", "reviewed_at", "rejection_reason", "created", "updated")
OUTBOX_COLUMNS = ("correction_id", "region", "channel", "recipient", "subject", "body", "dedupe_key", "status",
                  "attempts", "next_attempt_at", "claimed_at", "claimed_by", "provider_id", "sent_at", "last_error",
                  "created")
AUDIT_COLUMNS = ("id", "at", "actor_id", "actor_label", "action", "correction_id", "decision_id", "sweep_run_id",
                 "before", "after", "note", "seq", "redacted")
REDECISION_COLUMNS = ("old_decision_id", "new_decision_id", "outcome", "recall_number", "trigger_fact_id",
                      "sweep_run_id", "shared", "created")
_CHECKED: set = set()


def _checked_columns(model, columns, *, with_id: bool):
    if model not in _CHECKED:
        actual = _columns(model, with_id=with_id)
        if set(actual) != set(columns) or len(actual) != len(columns):
            raise RuntimeError(f"{model.__name__}: columns {sorted(set(actual) ^ set(columns))} named wrongly")
        _CHECKED.add(model)
    return columns


def write_page(plans: list[Plan], beliefs: PageBeliefs, run, report: SweepReport, *, letters=None):
    """Write every row of the page (see the module docstring). Raises PageFallback / IntegrityError."""
    letters = letters or Letters()
    now = timezone.now()
    run_id = run.pk if run is not None else None
    old_ids = [p.decision.id for p in plans]
    standing = Decision.Status.STANDING.value
    corrected, reaffirmed = Redecision.Outcome.CORRECTED.value, Redecision.Outcome.REAFFIRMED.value
    drafts = sum(1 for p in plans if p.changed and not p.coalesced)
    # Memory writes its own table: the page's decisions superseded in one guarded UPDATE; every one
    # must still have been standing, else the page is rolled back and goes the per-decision way.
    superseded = supersede_standing(old_ids, at=now)
    if superseded != len(old_ids):
        raise PageFallback(f"{len(old_ids) - superseded} decision(s) of the page no longer standing")
    with connection.cursor() as django_cursor:
        # The new decisions', corrections' and audit events' ids, in order, in one round trip (the audit
        # events' so the chain seals exactly these after commit).
        taken = "ARRAY(SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s) AS g ORDER BY g)"
        django_cursor.execute(f"SELECT {taken}, {taken}, {taken}", [
            Decision._meta.db_table, len(plans), Correction._meta.db_table, drafts, AuditEvent._meta.db_table, drafts])
        new_ids, correction_ids, audit_ids = django_cursor.fetchone()
        if len(new_ids) != len(plans) or len(correction_ids) != drafts or new_ids != sorted(new_ids) \
                or correction_ids != sorted(correction_ids) or len(audit_ids) != drafts:
            raise PageFallback("ids not taken in order")
        correction_ids, audit_ids = iter(correction_ids), iter(audit_ids)
        cursor = django_cursor.cursor  # psycopg's own: COPY, in this transaction

        decisions, sets, premises, inputs = [], {}, [], []
        corrections, messages, audits, redecisions = [], [], [], []
        texts = _Texts()
        set_ids = _ReadSetIds(sets)
        for p, new_id in zip(plans, new_ids, strict=True):
            d, o, patient = p.decision, p.outcome, p.decision.patient
            region = getattr(patient, "region", "") or ""
            set_id = set_ids.of(o)
            decisions.append((
                new_id, uuid.uuid4(), patient.pk, region, d.question, o.subject, o.verdict, o.answer, o.reasoner,
                o.reasoner_verdict, o.guardrail_override, o.inputs_hash, standing, d.id, now, None, now, set_id))
            premises.extend((new_id, scope) for scope in sorted(set(o.premises)))
            inputs.extend((new_id, dispensing_id, fp) for dispensing_id, fp in sorted(set(o.inputs)))
            if p.changed and not p.coalesced:
                correction_id = next(correction_ids)
                correction = _correction_row(correction_id, p, new_id, now, run_id, beliefs, letters, texts)
                corrections.append(tuple(correction[c] for c in CORRECTION_COLUMNS))
                message, audit_row = _message_and_audit(patient, correction, (new_id, next(audit_ids)), now,
                                                        run_id, texts)
                messages.append(tuple(message[c] for c in OUTBOX_COLUMNS))
                audits.append(audit_row)
            redecisions.append((d.id, new_id, corrected if p.changed else reaffirmed, p.recall_number,
                                p.trigger.id if p.trigger else None, run_id, p.shared or p.coalesced, now))
            report.examined += 1
            if p.changed:
                report.corrected += 1
            else:
                report.reaffirmed += 1

        read_sets.store(sets)  # only the sets no decision read before
        _copy(cursor, Decision, _checked_columns(Decision, DECISION_COLUMNS, with_id=True), decisions)
        _copy(cursor, DecisionPremise, _checked_columns(DecisionPremise, PREMISE_COLUMNS, with_id=False), premises)
        _copy(cursor, DecisionInput, _checked_columns(DecisionInput, INPUT_COLUMNS, with_id=False), inputs)
        _copy(cursor, Correction, _checked_columns(Correction, CORRECTION_COLUMNS, with_id=True), corrections)
        _copy(cursor, OutboxMessage, _checked_columns(OutboxMessage, OUTBOX_COLUMNS, with_id=False), messages)
        _copy(cursor, AuditEvent, _checked_columns(AuditEvent, AUDIT_COLUMNS, with_id=True), audits)
        audit_chain.written(AuditEvent, [row[0] for row in audits])  # linked after the page commits
        _copy(cursor, Redecision, _checked_columns(Redecision, REDECISION_COLUMNS, with_id=False), redecisions)


class _ReadSetIds:
    """Each outcome's read set id (memory.read_sets), its members collected in `sets` for the page's one
    store. A group's members share their first member's retrieved list (PageDecider._stamp copies the
    outcome, not the list), so the members are built and hashed once per list and load-bearing facts:
    the lists are alive until the page is written, so their identities are not reused meanwhile."""

    def __init__(self, sets: dict):
        self.sets = sets
        self._ids: dict[tuple, str] = {}

    def of(self, outcome) -> str:
        key = (id(outcome.retrieved), frozenset(outcome.load_bearing_ids))
        set_id = self._ids.get(key)
        if set_id is None:
            bearing = outcome.load_bearing_ids  # as Outcome.read_specs, without building ReadSpec objects
            members = [read_sets.Member(r.fact.id, r.fact.fact_key, r.fact.version, rank, float(r.score),
                                        r.fact.id in bearing) for rank, r in enumerate(outcome.retrieved, start=1)]
            set_id = self._ids[key] = read_sets.read_set_id(members)
            self.sets.setdefault(set_id, members)
        return set_id


class _Texts:
    """What a page's rows repeat: the JSON of fact diffs and of audit before/after, by their inputs
    (a fact version's content is immutable; its retraction is part of the key)."""

    def __init__(self):
        self._diffs: dict = {}
        self._json: dict = {}

    def diff(self, previous, trigger) -> str:
        key = (_version(previous), getattr(previous, "retraction_reason", None), _version(trigger),
               getattr(trigger, "retraction_reason", None))
        if key not in self._diffs:
            self._diffs[key] = json.dumps(fact_diff(previous, trigger))
        return self._diffs[key]

    def json(self, **value) -> str:
        key = tuple(value.items())
        if key not in self._json:
            self._json[key] = json.dumps(value)
        return self._json[key]


def _correction_row(correction_id, p: Plan, new_id, now, run_id, beliefs: PageBeliefs, letters, texts) -> dict:
    """The draft's columns (corrections.drafts.correction_values) with this page's ids and timestamps."""
    d, o, patient = p.decision, p.outcome, p.decision.patient
    trigger, previous = p.trigger, p.previous
    cause = trigger or previous
    # drugs.matching reads the stored row: its ndc_product column, not a recomputation.
    rows = [replace(r.matched, ndc_product=product)
            for r, product in beliefs.records.get(patient.pk, ()) if r.drug == d.subject] if d.subject else []
    bearing = [r.fact for r in o.retrieved if r.fact.id in o.load_bearing_ids]
    grouped = getattr(beliefs, "grouped", None)
    match_class = grouped.match_class(p.group, rows, bearing) if grouped else strongest_match(rows, bearing)
    text = letters.text(patient, d.verdict, o, cause, previous, match_class=match_class,
                        dispensing_changed=p.dispensing_changed)
    values = correction_values(
        kind=Correction.Kind.CORRECTION, patient=patient, match=Correction.Match.ASKED, match_class=match_class,
        trigger=trigger, previous=previous, old_decision_id=d.id, new_decision_id=new_id, old_verdict=d.verdict,
        old_answer=d.answer, new_verdict=o.verdict, new_answer=o.answer, text=text, key=p.key, run_id=run_id)
    return {**values, "id": correction_id, "public_id": uuid.uuid4(), "diff": texts.diff(previous, trigger),
            "matched_lots": "[]", "created": now, "updated": now}


_DRAFTED = AuditEvent.Action.DRAFTED.value


class Letters:
    """corrections.drafting.correction_text, rendered once per letter that differs only in the name.

    An email letter names the patient once ("Dear <name>,"); the rest depends on the verdicts, the
    facts and the drug. So the text is rendered with a marker for the name and the marker replaced
    per patient, after checking, the first time for each letter, that this gives exactly what
    rendering for that patient gives (if it does not, that letter is rendered per patient). SMS are
    always rendered per patient: their length limit depends on the name."""

    MARK = "\x00patient\x00"

    def __init__(self):
        self._texts: dict[tuple, str | None] = {}

    def text(self, patient, old_verdict, outcome, fact, previous, *, match_class="", dispensing_changed=False) -> str:
        channel = patient.contact()[0]
        how = {"match_class": match_class, "dispensing_changed": dispensing_changed}
        if channel == "sms":
            return correction_text(patient, old_verdict, outcome, fact, previous, **how)
        language = getattr(patient, "preferred_language", "") or "en"
        key = (channel, language, old_verdict, outcome.verdict, outcome.subject, _version(fact), _version(previous),
               match_class, dispensing_changed, serious_answer(outcome, fact))
        if key not in self._texts:
            real = correction_text(patient, old_verdict, outcome, fact, previous, **how)
            marked = correction_text(SimpleNamespace(display_name=self.MARK, preferred_channel=channel,
                                                     preferred_language=language),
                                     old_verdict, outcome, fact, previous, **how)
            same = marked.count(self.MARK) == 1 and marked.replace(self.MARK, patient.display_name) == real
            self._texts[key] = marked if same else None
            return real
        marked = self._texts[key]
        if marked is None:
            return correction_text(patient, old_verdict, outcome, fact, previous, **how)
        return marked.replace(self.MARK, patient.display_name)


class SweepCaches:
    """What one sweep's set-based pages share: fact versions read, letters rendered and groups decided."""

    def __init__(self):
        self.facts = FactCache()
        self.letters = Letters()
        self.groups = SweepGroups()


def _version(fact):
    return (fact.pk, fact.content_hash, fact.retracted_at) if fact is not None else None


def _message_and_audit(patient, correction: dict, ids, now, run_id, texts) -> tuple[dict, tuple]:
    new_id, audit_id = ids  # the new decision's, the audit event's
    message = {**message_values(patient, correction), "correction_id": correction["id"], "created": now}
    before, after = drafted_event(correction)
    # seq stays empty: the chain links the event after the page commits (core.audit_chain).
    row = (audit_id, now, None, SWEEP_ACTOR, _DRAFTED, correction["id"], new_id, run_id, texts.json(**before),
           texts.json(**after), "", None, False)
    return message, row


# --- decisions grouped by what the rules can tell apart -------------------------------------------

_UNGROUPABLE = object()


def _mark(position: int) -> str:
    # PostgreSQL text cannot hold NUL, so no fact, lot or name read from the database contains this.
    return f"\x00lot{position}\x00"


def _unmark(text: str, lots) -> str:
    for position, lot in lots:
        text = text.replace(_mark(position), lot)
    return text


@dataclass
class _Group:
    outcome: object            # decided for the first member, with its inert lots marked
    versions: list             # "fact_key@version" of its reads (the inputs fingerprint's part)
    match_classes: dict = field(default_factory=dict)
    unseen: "_Unseen | None" = None


class _FactLots:
    """What a set of facts could read of a patient's lot: their lots, the near-lot keys of those
    (drugs.lots) and their scopes (drugs.scopes)."""

    def __init__(self, facts):
        from drugs.lots import near_lot_keys

        self.lots = {f.lot for f in facts if f.lot}
        self.near = set().union(*(near_lot_keys(f.lot) for f in facts if f.lot))
        self.scopes = {s for f in facts for s in (getattr(f, "scopes", None) or ())}

    def reach(self, lot: str, rows, subject: str) -> bool:
        """The lot is one of theirs, near one of theirs, or a lot-level scope of its rows is theirs."""
        from drugs.lots import near_lot_key
        from drugs.scopes import dispensing_scopes

        if lot in self.lots or near_lot_key(lot) in self.near:
            return True
        return bool(self.scopes) and any(s in self.scopes for row in rows if row.lot == lot
                                         for s in dispensing_scopes(subject, lot, row.ndc_product)
                                         if s.rsplit("|", 1)[-1] == lot)


class _Unseen:
    """The facts a group's first member read that its page did not load (semantic neighbours): the
    group key saw neither their dates nor their lots, so a member joins only if it answers their date
    comparisons as the first member did (`view`, from the first member's rows) and none of its inert
    lots is within their reach."""

    def __init__(self, facts, subject: str, rows):
        self.subject = subject
        self.dated = [f for f in facts if reads_dates(f)]
        self.lots = _FactLots(facts)
        self.view = self.date_view(rows)

    def date_view(self, rows) -> tuple:
        return tuple(date_view(self.dated, row) for row in rows) if self.dated else ()

    def inert(self, lots, rows) -> bool:
        return not any(self.lots.reach(lot, rows, self.subject) for lot in lots)

    def admits(self, rows, inert_lots) -> bool:
        return (not self.dated or self.date_view(rows) == self.view) and self.inert(inert_lots, rows)


class SweepGroups:
    """Groups decided by earlier pages of one sweep (PageDecider), by the page's believed facts and the
    group key, each with the reads its first member's context had. A later page reuses a group only
    when it loaded the very same fact versions (the key's date view and inert lots are answers about
    those facts, so equal keys mean the same only over equal facts) and its own first member's context
    reads the same versions with the same scores and matches (the semantic neighbours are read per
    page). The rules read nothing else (the key holds every other input), so the reused outcome is the
    one deciding would give; each page reads its own snapshot, so a fact changed between pages changes
    what the page loaded and the group is decided again."""

    LIMIT = 10_000  # group keys remembered; a sweep of many distinct groups starts again past it

    def __init__(self):
        self._groups: dict[tuple, tuple[tuple, _Group]] = {}
        self.reused = 0

    def get(self, key, reads: tuple):
        found = self._groups.get(key)
        if found is None or found[0] != reads:
            return None
        self.reused += 1
        return found[1]

    def put(self, key, reads: tuple, group: "_Group"):
        if len(self._groups) >= self.LIMIT:
            self._groups.clear()
        self._groups[key] = (reads, group)


def _reads(ctx) -> tuple:
    """What a context reads of the believed facts: each version, its score and match, in rank order."""
    return tuple((r.fact.id, r.fact.content_hash, r.score, r.match) for r in ctx.retrieved)


class PageDecider:
    """ask.services.decide for a page's decisions, once per group that the rules cannot tell apart.

    Two decisions of a page are in one group when they have the same question, stated subject and
    resolved subject (and the same drugs when nothing of the subject is dispensed), and dispensing
    rows of that subject equal in every attribute decide() reads (drug, NDC, stored NDC product,
    lot-unknown flag, lot) except their ids,
    fingerprints and *inert* lots, at the same places, and with dates the rules cannot tell apart:
    the same answer to every date comparison the page's believed facts make (ask.rules.date_view;
    fill times differ between any two patients, so an exact date would put each in a group of one).
    A lot is inert on the page when it is recorded (known), read cleanly from its field (no other lot
    it may mean, drugs.lot_field), is no believed fact's lot (raw or normalised, drugs.lots) and none
    of its scopes (drugs.scopes) is a scope of a believed fact the page loaded. The rules then read an
    inert lot only as text: matching compares a row's normalised
    lot with a fact's (never equal), retrieval ranks by `fact.lot in lots` (never in), scopes only
    meet facts' scopes (never met), and the answer shows the sorted lots (`", ".join`, and their
    count). So the group's first member is decided through ask.services.decide, and again from its
    context with its inert lots replaced in place by markers; when the two agree (answer with the
    markers put back, verdict, reads, load-bearing facts, guardrail) every member's outcome is that
    marked one with its own lots put in, its own premises, inputs and fingerprint.
    A group whose first member reads a fact the page did not load (a semantic neighbour, whose
    dates and lots the key did not see), or whose two decisions disagree, is decided member by
    member. A patient whose lot a recall names never has that lot inert, so a recalled lot and an
    unrecalled one never share a group."""

    def __init__(self, decider, beliefs, *, shared: SweepGroups | None = None):
        self.decider, self.beliefs = decider, beliefs
        self.shared = shared  # groups decided by the sweep's earlier pages
        self._facts_key = tuple(f.id for f in beliefs.facts)  # the believed versions this page loaded
        self._fact_ids = {f.id for f in beliefs.facts}
        # A lot equal to a recall's, a near miss of it (drugs.lots) or in its scopes is never inert.
        self._page_lots = _FactLots(beliefs.facts)
        self._groups: dict[tuple, object] = {}
        self._resolved: dict[tuple, object] = {}
        self._inert: dict[tuple, bool] = {}
        self._dated = [f for f in beliefs.facts if reads_dates(f)]
        self._date_views: dict[tuple, tuple] = {}
        self.groups_decided = 0
        self.stamped = 0  # decisions given their group's outcome (not decided themselves)

    def decide(self, patient, question: str, subject: str):
        """(outcome, shared, group key or None): SharedDecider.decide with this page's grouping."""
        found = []

        def unshared(patient, question, subject):
            outcome, key = self._grouped(patient, question, subject)
            found.append(key)
            return outcome

        outcome, shared = self.decider.decide(patient, question, subject, unshared=unshared)
        return outcome, shared, (found[0] if found else None)

    def _plain(self, patient, question, subject):
        from ask.services import decide

        self.decider.calls += 1
        return decide(patient, question, subject=subject or None, reasoner=self.decider.reasoner,
                      beliefs=self.beliefs)

    def resolve(self, patient, question, subject):
        from ask.services import resolve_subject

        drugs = tuple(self.beliefs.patient_drugs(patient))
        key = (question, subject or "", drugs)
        if key not in self._resolved:
            self._resolved[key] = resolve_subject(patient, question, subject or None, beliefs=self.beliefs)[0]
        return self._resolved[key], drugs

    def _is_inert(self, resolved, lot, rows) -> bool:
        if lot in ("*", "?") or lot in self._page_lots.lots:
            return False
        if any(row.lot_alternatives for row in rows if row.lot == lot):
            return False  # a lot field read with doubt: its other readings may be a recall's lot
        key = (resolved, lot, tuple(sorted({(r.ndc_product, r.lot_known) for r in rows if r.lot == lot})))
        if key not in self._inert:
            self._inert[key] = (all(row.lot_known for row in rows if row.lot == lot)
                                and not self._page_lots.reach(lot, rows, resolved))
        return self._inert[key]

    def _grouped(self, patient, question, subject):
        resolved, drugs = self.resolve(patient, question, subject)
        if resolved is None or resolved not in self.beliefs._subjects:
            return self._plain(patient, question, subject), None
        rows = self.beliefs.dispensed_rows(patient, resolved)
        lots = sorted({row.lot for row in rows} - {""})
        inert = {lot for lot in lots if self._is_inert(resolved, lot, rows)}
        place = {lot: n for n, lot in enumerate(lots)}
        stored = self.beliefs.stored_product
        # The patient's other drugs are read only to resolve the subject (in the key as `resolved`) and,
        # with nothing of it dispensed, to say what else is on record (ask.answers.not_dispensed_answer):
        # patients holding the same drug among different others decide alike.
        key = (question, subject or "", resolved, None if rows else drugs,
               tuple(None if lot in inert else lot for lot in lots),
               tuple((r.drug, r.ndc, stored.get(r.id), r.lot_unknown, self._date_view(r), r.lot_alternatives,
                      ("inert", place[r.lot]) if r.lot in inert else r.lot) for r in rows))
        mine = [(place[lot], lot) for lot in lots if lot in inert]
        group = self._groups.get(key)
        if group is None:
            outcome, group = self._first(patient, question, subject, resolved, rows, lots, inert, mine, key)
            self._groups[key] = group
            if outcome is None:  # an earlier page's group, its reads the same on this page
                self.stamped += 1
                return self._stamp(group, question, resolved, rows, lots, mine), key
            return outcome, (key if group is not _UNGROUPABLE else None)
        if group is _UNGROUPABLE or not group.unseen.admits(rows, inert):
            return self._plain(patient, question, subject), None
        self.stamped += 1
        return self._stamp(group, question, resolved, rows, lots, mine), key

    def _date_view(self, row) -> tuple:
        key = (row.dispensed_at.date() if row.dispensed_at is not None else None, row.expiry)
        if key not in self._date_views:
            self._date_views[key] = date_view(self._dated, row)
        return self._date_views[key]

    def _first(self, patient, question, subject, resolved, rows, lots, inert, mine, key):
        """The group's first member, decided for real and with its inert lots marked; or (None, group)
        when an earlier page of the sweep decided this group and the member's context reads the same."""
        from dataclasses import replace

        from ask.reasoners import get_reasoner
        from ask.services import build_context, finish

        ctx = build_context(patient, question, resolved, beliefs=self.beliefs)
        if self.shared is not None:
            earlier = self.shared.get((self._facts_key, key), _reads(ctx))
            if earlier is not None and earlier.unseen.admits(rows, inert):
                return None, earlier
        self.groups_decided += 1
        real = self._plain(patient, question, subject)  # through ask.services.decide, as every first member
        if real.subject != resolved:
            return real, _UNGROUPABLE
        # Members share its retrieval: the exact part ranks only the page's facts, where their inert
        # lots match none, and semantic neighbours depend on the question and that part alone. A
        # neighbour the page did not load was not seen by the key, so each member must answer its
        # date comparisons as the first did and hold no lot it names.
        unseen = _Unseen([r.fact for r in real.retrieved if r.fact.id not in self._fact_ids], resolved, rows)
        if not unseen.inert(inert, rows):
            return real, _UNGROUPABLE
        if not inert:
            return real, self._keep(key, ctx, _Group(real, [f"{r.fact.fact_key}@{r.fact.version}"
                                                            for r in real.retrieved], unseen=unseen))
        reasoner = get_reasoner(self.decider.reasoner)
        marked_ctx = replace(ctx, patient_lots=[_mark(n) if lot in inert else lot for n, lot in enumerate(lots)],
                             memo={})
        self.decider.calls += 1
        marked = finish(marked_ctx, reasoner.decide(marked_ctx))
        back = replace(marked, answer=_unmark(marked.answer, mine),
                       guardrail_override=_unmark(marked.guardrail_override, mine), patient_lots=real.patient_lots)
        if _outcome_fields(back) != _outcome_fields(real):
            log.warning("sweep: a grouped decision disagreed with its own marked form; deciding its group per member")
            return real, _UNGROUPABLE
        return real, self._keep(key, ctx, _Group(marked, [f"{r.fact.fact_key}@{r.fact.version}"
                                                          for r in marked.retrieved], unseen=unseen))

    def _keep(self, key, ctx, group: "_Group") -> "_Group":
        if self.shared is not None:
            self.shared.put((self._facts_key, key), _reads(ctx), group)
        return group

    def _stamp(self, group: _Group, question, resolved, rows, lots, mine):
        from dataclasses import replace

        from ask.services import premises_for
        from memory.decisions import inputs_fingerprint

        o = group.outcome
        inputs = [(row.id, row.fingerprint) for row in rows]
        return replace(
            o, answer=_unmark(o.answer, mine) if mine else o.answer,
            guardrail_override=_unmark(o.guardrail_override, mine) if mine else o.guardrail_override,
            load_bearing_ids=set(o.load_bearing_ids), patient_lots=lots, premises=premises_for(resolved, rows),
            inputs=inputs, inputs_hash=inputs_fingerprint(question, [f"{i}:{fp}" for i, fp in inputs] or lots,
                                                          group.versions))

    def match_class(self, key, rows, facts) -> str:
        """redecide.strongest_match, once per group and load-bearing facts: the facts are among the
        group's reads, so an inert lot matches none of them (see the class docstring)."""
        group = self._groups.get(key) if key is not None else None
        if not isinstance(group, _Group):
            return strongest_match(rows, facts)
        ids = tuple(sorted(f.id for f in facts if f is not None))
        if ids not in group.match_classes:
            group.match_classes[ids] = strongest_match(rows, facts)
        return group.match_classes[ids]


def _outcome_fields(o) -> tuple:
    return (o.verdict, o.answer, o.reasoner, o.subject, [(r.fact.id, r.score, r.match) for r in o.retrieved],
            sorted(o.load_bearing_ids), o.reasoner_verdict, o.guardrail_override, o.inputs_hash, o.patient_lots,
            o.premises, o.inputs)
