"""The sweep's set-based page: the normal path for the rules reasoner on PostgreSQL.

One locked page of the stale set (corrections.sweep.stale_page has already read its decisions,
their stale reasons and pending drafts) is handled by write_set_based, in a savepoint of the page's
one transaction, in two steps:

  plan_page   read the page's dispensing and candidate believed facts in a few queries
              (ask.beliefs.PageBeliefs), then decide every decision in memory through the same
              ask.services.decide the ask path uses, and work out each decision's letter exactly as
              corrections.sweep.one_by_one.redecide does (trigger, dedupe key, coalescing);
  write_page  supersede the page's decisions in one UPDATE guarded by status = 'standing'
              (memory.fact_writes.supersede_standing; the row count must be the page's size),
              take ids with nextval over generate_series, store the page's read sets not stored yet
              (memory.read_sets.store) and premise sets (memory.premise_sets.store), and COPY decisions,
              inputs, corrections, outbox messages, audit events and redecisions (core.copy_rows).

The rows are the ones the per-decision path writes, ids included (tests/corrections/test_sweep_set_based.py),
because ids are taken per table in the same order. Anything unusual raises or is refused up front
(`per_decision_reason`): the savepoint is rolled back and the run takes the per-decision path for
that page — an integrity error (a dedupe key taken by a concurrent sweep), a decision no longer
standing, a pending draft to stale, a model reasoner, an engine other than PostgreSQL.

Decisions are decided once per group that the rules cannot tell apart (corrections.sweep.groups:
equal inputs up to lots no believed fact names), once per sweep while its pages load the same fact
versions, which is what makes pages of distinct patients cheap.

A draft's values (key, recipient, subject, classification, audit before/after) come from
corrections.drafts, the functions the per-decision path saves through the ORM.
"""

import json
import logging
import uuid
from dataclasses import dataclass, replace
from types import SimpleNamespace

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from ask.beliefs import FactCache, PageBeliefs
from ask.reasoners import get_reasoner
from ask.services import resolve_subject
from core import audit_chain
from core.copy_rows import copy_models
from core.retry import is_retryable
from memory import premise_sets, read_sets
from memory.decisions import DecisionAlreadySuperseded
from memory.fact_writes import supersede_standing
from memory.models import Decision, DecisionInput
from recalls.selectors import prefetch as prefetch_texts

from ..drafting import correction_text, fact_diff, serious_answer
from ..drafts import SWEEP_ACTOR, coalesce, correction_values, draft_key, drafted_event, message_values
from ..models import AuditEvent, Correction, OutboxMessage, Redecision
from . import faults
from .change import change_token, letter_fact, pick_trigger, strongest_match
from .groups import PageDecider, SweepGroups
from .report import SweepReport
from .stale_page import StalePage

log = logging.getLogger(__name__)


class PageFallback(Exception):
    """This page must go the per-decision way (the savepoint is rolled back first)."""


def write_set_based(page: StalePage, decider, run, page_no: int, report: SweepReport, *, dry_run: bool,
                    caches: "SweepCaches") -> bool:
    """The page as a set, in a savepoint: planned (plan_page), then written (write_page). False: the
    page takes the per-decision path (corrections.sweep.one_by_one), refused up front or anything
    unusual rolled back; its reasoner runs are then not counted here."""
    why = per_decision_reason(decider, page.decisions, page.pending, dry_run=dry_run)
    if why:
        if not dry_run:
            log.info("sweep page %d takes the per-decision path: %s", page_no, why)
        return False
    calls_before = decider.calls
    one = SweepReport()
    try:
        with transaction.atomic():
            plans, beliefs = plan_page(page.decisions, page.reasons, decider, fact_cache=caches.facts,
                                       groups=caches.groups)
            faults.maybe_crash("mid_page", page_no)
            write_page(plans, beliefs, run, one, letters=caches.letters)
    except (DecisionAlreadySuperseded, IntegrityError, PageFallback) as exc:
        log.info("sweep page %d falls back to the per-decision path: %s", page_no, exc)
    except Exception as exc:  # noqa: BLE001 - the per-decision path records the failure per decision
        if is_retryable(exc):
            raise  # the whole page again, on a new snapshot (run_in_transaction)
        log.exception("sweep page %d falls back to the per-decision path", page_no)
    else:
        one.set_pages = 1
        report.add(one)
        return True
    decider.calls = calls_before  # what the per-decision path calls is what counts
    decider.reset()
    return False


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
              groups: SweepGroups | None = None) -> tuple[list[Plan], PageBeliefs]:
    """Decide the page in memory. Reads: dispensing (1 query), believed fact ids (1), fact rows not
    cached yet (0-1), the latest version of each retracted read (per page), semantic neighbours
    per distinct question when the exact matches leave room, and the dedupe keys (1)."""
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


# The columns each COPY names, in the order its row tuples are built below (core.copy_rows refuses to COPY
# when a table's concrete columns are not exactly these).
DECISION_COLUMNS = ("id", "public_id", "patient_id", "region", "question", "subject", "verdict", "answer",
                    "reasoner", "reasoner_verdict", "guardrail_override", "inputs_hash", "status", "replaces_id",
                    "decided_at", "superseded_at", "created", "read_set_id", "premise_set_id")
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

        decisions, sets, premise_set_rows, inputs = [], {}, {}, []
        corrections, messages, audits, redecisions = [], [], [], []
        texts = _Texts()
        set_ids = _ReadSetIds(sets)
        premise_set_ids = _PremiseSetIds(premise_set_rows)
        for p, new_id in zip(plans, new_ids, strict=True):
            d, o, patient = p.decision, p.outcome, p.decision.patient
            region = getattr(patient, "region", "") or ""
            set_id = set_ids.of(o)
            decisions.append((
                new_id, uuid.uuid4(), patient.pk, region, d.question, o.subject, o.verdict, o.answer, o.reasoner,
                o.reasoner_verdict, o.guardrail_override, o.inputs_hash, standing, d.id, now, None, now, set_id,
                premise_set_ids.of(o.premises)))
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
        premise_sets.store(premise_set_rows)  # only the sets no decision rested on before
        copy_models(cursor, [
            (Decision, DECISION_COLUMNS, decisions, True),
            (DecisionInput, INPUT_COLUMNS, inputs, False), (Correction, CORRECTION_COLUMNS, corrections, True),
            (OutboxMessage, OUTBOX_COLUMNS, messages, False), (AuditEvent, AUDIT_COLUMNS, audits, True),
            (Redecision, REDECISION_COLUMNS, redecisions, False)])
        audit_chain.written(AuditEvent, [row[0] for row in audits])  # linked after the page commits


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


class _PremiseSetIds:
    """Each outcome's premise set id (memory.premise_sets), its scopes collected in `sets` for the page's one
    store; hashed once per distinct collection of scopes of the page."""

    def __init__(self, sets: dict):
        self.sets = sets
        self._ids: dict[tuple, str] = {}

    def of(self, premises) -> str:
        key = tuple(premises)
        set_id = self._ids.get(key)
        if set_id is None:
            scopes = premise_sets.canonical(premises)
            set_id = self._ids[key] = premise_sets.premise_set_id(scopes)
            self.sets.setdefault(set_id, scopes)
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
