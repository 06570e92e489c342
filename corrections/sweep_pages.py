"""The sweep's set-based page (issue #14): the normal path for the rules reasoner on PostgreSQL.

One locked page of the stale set (corrections.sweep._process_page has already read its decisions,
their stale reasons and pending drafts) is handled in two steps inside the page's one transaction:

  plan_page   read the page's dispensing and candidate believed facts in a few queries
              (ask.beliefs.PageBeliefs), then decide every decision in memory through the same
              ask.services.decide the ask path uses, and work out each decision's letter exactly as
              corrections.sweep._redecide does (trigger, dedupe key, coalescing);
  write_page  supersede the page's decisions in one UPDATE guarded by status = 'standing' (the
              row count must be the page's size), take ids with nextval over generate_series, and
              COPY decisions, reads, premises, inputs, corrections, outbox messages, audit events
              and redecisions.

The rows are the ones the per-decision path writes, ids included (tests/test_sweep_set_based.py),
because ids are taken per table in the same order. Anything unusual raises or is refused up front
(`per_decision_reason`): the caller rolls the savepoint back and runs the per-decision path for
that page — an integrity error (a dedupe key taken by a concurrent sweep), a decision no longer
standing, a pending draft to stale, a model reasoner, an engine other than PostgreSQL.
"""

import json
import logging
import uuid
from dataclasses import dataclass
from types import SimpleNamespace

from django.db import connection
from django.utils import timezone

from ask.beliefs import FactCache, PageBeliefs
from ask.reasoners import get_reasoner
from core.env import env_bool
from drugs.recall_terms import severity
from memory.models import Decision, DecisionInput, DecisionPremise, DecisionRead

from .drafting import correction_text, fact_diff
from .models import AuditEvent, Correction, OutboxMessage, Redecision
from .redecide import (
    LIVE_STATUSES,
    SWEEP_ACTOR,
    SweepReport,
    change_token,
    dedupe_key,
    pick_trigger,
    strongest_match,
)

log = logging.getLogger(__name__)


class PageFallback(Exception):
    """This page must go the per-decision way (the savepoint is rolled back first)."""


def per_decision_reason(decider, decisions, pending, *, dry_run: bool) -> str:
    """Why this page cannot take the set-based path ("" when it can)."""
    if dry_run:
        return "dry run"
    if not env_bool("UNSAY_SWEEP_SET_BASED", True):
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


def plan_page(decisions, reasons, decider, *, fact_cache: FactCache) -> tuple[list[Plan], PageBeliefs]:
    """Decide the page in memory. Reads: dispensing (1 query), believed fact ids (1), fact rows not
    cached yet (0-1), the latest version of each retracted read (per page), semantic neighbours
    per distinct question when the exact matches leave room, and the dedupe keys (1)."""
    from ask.services import resolve_subject

    beliefs = PageBeliefs({d.patient_id for d in decisions}, cache=fact_cache)
    decider.preload_from(beliefs)
    wanted = []
    for d in decisions:
        resolved, _ = resolve_subject(d.patient, d.question, d.subject or None, beliefs=beliefs)
        wanted.append((d.patient_id, resolved))
    beliefs.load_facts(wanted)
    latest: dict = {}
    plans = []
    for d in decisions:
        previous, trigger = pick_trigger(reasons[d.id], latest)
        outcome, shared = decider.decide(d.patient, d.question, d.subject, beliefs=beliefs)
        token = change_token(trigger, previous, outcome)
        if trigger is None and previous is None:
            bearing = [r.fact for r in outcome.retrieved if r.fact.id in outcome.load_bearing_ids]
            trigger = max(bearing, key=lambda f: (severity(f), f.id), default=None)
        cause = trigger or previous
        recall_number = (cause.attributes or {}).get("recall_number", "") if cause else ""
        changed = outcome.verdict != d.verdict
        key = dedupe_key("correction", d.patient_id, d.subject, outcome.verdict, token)
        plans.append(Plan(d, outcome, shared, trigger, previous, recall_number, changed, key))
    # Coalescing, in page order, exactly as _redecide: one live draft per key.
    existing = dict(Correction.objects.filter(dedupe_key__in=sorted({p.key for p in plans if p.changed}))
                    .values_list("dedupe_key", "status"))
    drafted: set[str] = set()
    for p in plans:
        if p.changed:
            earlier = None if p.key in drafted else existing.get(p.key)
            if p.key in drafted or earlier in LIVE_STATUSES:
                p.coalesced = True
            elif earlier is not None:  # that draft went stale or was rejected: a new message
                p.key = dedupe_key(p.key, "decision", p.decision.id)
            drafted.add(p.key)
    return plans, beliefs


def _next_ids(cursor, table: str, n: int) -> list[int]:
    if not n:
        return []
    cursor.execute(f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) FROM generate_series(1, %s)", [n])
    return [row[0] for row in cursor.fetchall()]


def _copy(cursor, model, columns: list[str], rows: list[tuple]):
    if not rows:
        return
    table = model._meta.db_table
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _columns(model, *, with_id: bool) -> list[str]:
    return [f.column for f in model._meta.concrete_fields if with_id or not f.primary_key]


def write_page(plans: list[Plan], beliefs: PageBeliefs, run, report: SweepReport, *, letters=None):
    """Write every row of the page (see the module docstring). Raises PageFallback / IntegrityError."""
    letters = letters or Letters()
    now = timezone.now()
    run_id = run.pk if run is not None else None
    old_ids = [p.decision.id for p in plans]
    with connection.cursor() as django_cursor:
        django_cursor.execute(
            "UPDATE memory_decision SET status = 'superseded', superseded_at = %s "
            "WHERE id = ANY(%s) AND status = 'standing'", [now, old_ids])
        if django_cursor.rowcount != len(old_ids):
            raise PageFallback(f"{len(old_ids) - django_cursor.rowcount} decision(s) of the page no longer standing")
        cursor = django_cursor.cursor  # psycopg's own: COPY, in this transaction
        new_ids = _next_ids(cursor, Decision._meta.db_table, len(plans))
        drafts = sum(1 for p in plans if p.changed and not p.coalesced)
        correction_ids = iter(_next_ids(cursor, Correction._meta.db_table, drafts))

        decisions, reads, premises, inputs = [], [], [], []
        corrections, messages, audits, redecisions = [], [], [], []
        for p, new_id in zip(plans, new_ids, strict=True):
            d, o, patient = p.decision, p.outcome, p.decision.patient
            region = getattr(patient, "region", "") or ""
            decisions.append({
                "id": new_id, "public_id": uuid.uuid4(), "patient_id": patient.pk, "region": region,
                "question": d.question, "subject": o.subject, "verdict": o.verdict, "answer": o.answer,
                "reasoner": o.reasoner, "reasoner_verdict": o.reasoner_verdict,
                "guardrail_override": o.guardrail_override, "inputs_hash": o.inputs_hash,
                "status": Decision.Status.STANDING.value, "replaces_id": d.id, "decided_at": now,
                "superseded_at": None, "created": now})
            bearing = o.load_bearing_ids  # as Outcome.read_specs, without building ReadSpec objects
            reads.extend((new_id, r.fact.id, r.fact.fact_key, r.fact.version, rank, r.score, r.fact.id in bearing)
                         for rank, r in enumerate(o.retrieved, start=1))
            premises.extend((new_id, scope) for scope in sorted(set(o.premises)))
            inputs.extend((new_id, dispensing_id, fp) for dispensing_id, fp in sorted(set(o.inputs)))
            if p.changed and not p.coalesced:
                correction_id = next(correction_ids)
                corrections.append(_correction_row(correction_id, p, new_id, now, run_id, beliefs, letters))
                message, audit = _message_and_audit(correction_id, corrections[-1], p, new_id, now, run_id)
                messages.append(message)
                audits.append(audit)
            redecisions.append({
                "old_decision_id": d.id, "new_decision_id": new_id,
                "outcome": (Redecision.Outcome.CORRECTED if p.changed else Redecision.Outcome.REAFFIRMED).value,
                "recall_number": p.recall_number, "trigger_fact_id": p.trigger.id if p.trigger else None,
                "sweep_run_id": run_id, "shared": p.shared or p.coalesced, "created": now})
            report.examined += 1
            if p.changed:
                report.corrected += 1
            else:
                report.reaffirmed += 1

        _copy_dicts(cursor, Decision, decisions, with_id=True)
        _copy(cursor, DecisionRead, ["decision_id", "fact_id", "fact_key", "fact_version", "rank", "score",
                                     "load_bearing"], reads)
        _copy(cursor, DecisionPremise, ["decision_id", "scope"], premises)
        _copy(cursor, DecisionInput, ["decision_id", "dispensing_id", "fingerprint"], inputs)
        _copy_dicts(cursor, Correction, corrections, with_id=True)
        _copy_dicts(cursor, OutboxMessage, messages, with_id=False)
        _copy_dicts(cursor, AuditEvent, audits, with_id=False)
        _copy_dicts(cursor, Redecision, redecisions, with_id=False)


def _copy_dicts(cursor, model, rows: list[dict], *, with_id: bool):
    """COPY rows given by column name; every concrete column must be named (no silent defaults)."""
    if not rows:
        return
    columns = _columns(model, with_id=with_id)
    if set(columns) != set(rows[0]):
        raise RuntimeError(f"{model.__name__}: columns {sorted(set(columns) ^ set(rows[0]))} named wrongly")
    _copy(cursor, model, columns, [tuple(row[c] for c in columns) for row in rows])


def _correction_row(correction_id, p: Plan, new_id, now, run_id, beliefs: PageBeliefs, letters) -> dict:
    d, o, patient = p.decision, p.outcome, p.decision.patient
    trigger, previous = p.trigger, p.previous
    cause = trigger or previous
    attrs = (cause.attributes or {}) if cause else {}
    # drugs.matching reads the stored row: its ndc_product column, not a recomputation.
    rows = [SimpleNamespace(drug=r.drug, ndc=r.ndc, ndc_product=product, lot=r.lot, lot_known=r.lot_known,
                            expiry=r.expiry, dispensed_at=r.dispensed_at)
            for r, product in beliefs.records.get(patient.pk, ()) if r.drug == d.subject] if d.subject else []
    match_class = strongest_match(rows, [r.fact for r in o.retrieved if r.fact.id in o.load_bearing_ids])
    return {
        "id": correction_id, "public_id": uuid.uuid4(), "kind": Correction.Kind.CORRECTION.value,
        "status": Correction.Status.DRAFT.value, "patient_id": patient.pk, "region": patient.region,
        "match": Correction.Match.ASKED.value, "match_class": match_class,
        "recall_number": attrs.get("recall_number", ""), "classification": attrs.get("classification", ""),
        "severity": severity(cause), "old_decision_id": d.id, "new_decision_id": new_id,
        "old_verdict": d.verdict, "old_answer": d.answer, "new_verdict": o.verdict, "new_answer": o.answer,
        "trigger_fact_id": trigger.id if trigger else None, "previous_fact_id": previous.id if previous else None,
        "diff": json.dumps(fact_diff(previous, trigger)),
        "drafted_text": letters.text(patient, d.verdict, o, cause, previous), "final_text": "",
        "dedupe_key": p.key, "sweep_run_id": run_id, "replaces_id": None, "reviewed_by_id": None,
        "reviewed_at": None, "rejection_reason": "", "created": now, "updated": now,
    }


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

    def text(self, patient, old_verdict, outcome, fact, previous) -> str:
        channel = getattr(patient, "preferred_channel", "") or "email"
        if channel == "sms":
            return correction_text(patient, old_verdict, outcome, fact, previous)
        key = (channel, old_verdict, outcome.verdict, outcome.subject, _version(fact), _version(previous))
        if key not in self._texts:
            real = correction_text(patient, old_verdict, outcome, fact, previous)
            marked = correction_text(SimpleNamespace(display_name=self.MARK, preferred_channel=channel),
                                     old_verdict, outcome, fact, previous)
            same = marked.count(self.MARK) == 1 and marked.replace(self.MARK, patient.display_name) == real
            self._texts[key] = marked if same else None
            return real
        marked = self._texts[key]
        if marked is None:
            return correction_text(patient, old_verdict, outcome, fact, previous)
        return marked.replace(self.MARK, patient.display_name)


class SweepCaches:
    """What one sweep's set-based pages share: fact versions read and letters rendered."""

    def __init__(self):
        self.facts = FactCache()
        self.letters = Letters()


def _version(fact):
    return (fact.pk, fact.content_hash, fact.retracted_at) if fact is not None else None


def _message_and_audit(correction_id, correction: dict, p: Plan, new_id, now, run_id) -> tuple[dict, dict]:
    patient = p.decision.patient
    channel = patient.preferred_channel
    recipient = patient.phone if channel == "sms" else patient.email
    message = {
        "correction_id": correction_id, "region": patient.region, "channel": channel, "recipient": recipient or "",
        "subject": f"Update about your {correction['recall_number'] and 'recalled ' or ''}medicine"[:200],
        "body": correction["drafted_text"], "dedupe_key": p.key, "status": OutboxMessage.Status.HELD.value,
        "attempts": 0, "next_attempt_at": None, "claimed_at": None, "claimed_by": "", "provider_id": "",
        "sent_at": None, "last_error": "", "created": now,
    }
    audit = {
        "at": now, "actor_id": None, "actor_label": SWEEP_ACTOR, "action": AuditEvent.Action.DRAFTED.value,
        "correction_id": correction_id, "decision_id": new_id, "sweep_run_id": run_id,
        "before": json.dumps({"verdict": p.decision.verdict}),
        "after": json.dumps({"verdict": p.outcome.verdict, "status": Correction.Status.DRAFT.value}), "note": "",
    }
    return message, audit
