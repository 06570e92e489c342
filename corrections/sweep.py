"""The sweep: find standing decisions whose load-bearing read is a retracted fact version, re-decide
them with the ask reasoner, and draft corrections (verdict moved) or record reaffirmations.

The stale set is a query, never a flag. Pages are keyset-ordered by decision id and locked with
FOR UPDATE SKIP LOCKED, and each page commits on its own: drafts start flowing before the
enumeration ends, two sweeps split the work instead of doubling it, and a killed sweep leaves
the rest of the set standing for the next one to find (re-decided decisions are superseded, so
they drop out of the query by themselves).

The stale set is read once when a sweep starts (staleness.all_stale_ids); each page locks and
re-checks its slice of it. A page is normally written as a set (corrections.sweep_pages: decided in
memory through ask.services.decide over the page's beliefs, written with COPY); anything unusual sends
that page through the per-decision path below (_redecide), which writes the same rows.
"""

import hashlib
import logging
import os
import signal
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.env import env_int, env_str
from core.retry import run_in_transaction
from drugs.recall_terms import is_active, severity  # the one reading of a recall (issue #11)
from memory.models import Decision, Fact
from memory.services import DecisionAlreadySuperseded

from . import staleness
from .drafting import correction_text, fact_diff, notice_text
from .models import AuditEvent, Correction, OutboxMessage, Redecision, SweepRun
from .staleness import Scope

log = logging.getLogger(__name__)

SWEEP_ACTOR = "sweep"
# A correction the patient has heard or is about to: a second one for the same change is coalesced.
LIVE_STATUSES = {Correction.Status.DRAFT, Correction.Status.APPROVED, Correction.Status.SENT}


# --- fault injection (crash-replay tests) ---------------------------------------------------


def _crash_point():
    """UNSAY_SWEEP_CRASH_AT=<point>:<page>, e.g. before_commit:3 — SIGKILL ourselves there."""
    raw = env_str("UNSAY_SWEEP_CRASH_AT", "")
    if not raw:
        return None
    point, _, page = raw.partition(":")
    if point not in {"mid_page", "before_commit", "after_commit", "mid_notices"}:
        raise ValueError(f"UNSAY_SWEEP_CRASH_AT={raw!r}: unknown point {point!r}.")
    return point, int(page or 1)


def _maybe_crash(point: str, page: int):
    target = _crash_point()
    if target and target == (point, page):
        log.warning("UNSAY_SWEEP_CRASH_AT reached (%s:%d): killing this process", point, page)
        os.kill(os.getpid(), signal.SIGKILL)


# --- the stale set (corrections.staleness) ---------------------------------------------------


def stale_decision_ids(*, after: int = 0, limit: int = 1000, fact_ids=None, patient_ids=None,
                       lock: bool = False) -> list[int]:
    """One keyset page of the stale set (all of it, or what the changed facts / patients touch)."""
    return staleness.stale_decision_ids(after=after, limit=limit, scope=Scope.of(fact_ids, patient_ids), lock=lock)


def count_stale(fact_ids=None, patient_ids=None) -> int:
    return staleness.count_stale(Scope.of(fact_ids, patient_ids))


# --- helpers --------------------------------------------------------------------------------


def worsened(before: Fact | None, after: Fact | None) -> bool:
    """A recall got worse for patients: more severe class, or back to active."""
    if after is None or after.kind != Fact.Kind.RECALL or not is_active(after):
        return False
    if before is None or not is_active(before):
        return True
    return severity(after) > severity(before)


def latest_version(fact: Fact) -> Fact | None:
    """Follow superseded_by to the version believed now (None if the chain ends in a bare retraction)."""
    current = fact
    seen = 0
    while current.retracted_at is not None:
        if not current.superseded_by_id or seen > 1000:
            return None
        current = Fact.objects.defer("embedding").get(pk=current.superseded_by_id)
        seen += 1
    return current


def dedupe_key(*parts) -> str:
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()


def _question_key(question: str) -> str:
    return " ".join(question.lower().split())


@dataclass
class SweepReport:
    examined: int = 0
    reaffirmed: int = 0
    corrected: int = 0
    notices: int = 0
    already_handled: int = 0
    reasoner_calls: int = 0
    errors: int = 0
    pages: int = 0
    set_pages: int = 0  # pages written by the set-based path (corrections.sweep_pages); not on the run row
    error_text: list[str] = field(default_factory=list)
    preview: list[dict] = field(default_factory=list)  # dry run: what would change
    run: SweepRun | None = None

    def add(self, other: "SweepReport"):
        for name in ("examined", "reaffirmed", "corrected", "notices", "already_handled", "reasoner_calls",
                     "errors", "pages", "set_pages"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.error_text.extend(other.error_text)
        self.preview.extend(other.preview)

    def summary(self) -> str:
        return (f"examined {self.examined}, reaffirmed {self.reaffirmed}, corrected {self.corrected}, "
                f"notices drafted {self.notices}, already handled {self.already_handled}, "
                f"reasoner calls {self.reasoner_calls}, errors {self.errors}")


class SharedDecider:
    """Calls ask.services.decide, sharing one result between decisions whose inputs are identical.

    The reasoner sees (question, subject, the patient's lots and NDCs of that drug, the patient's drugs, the
    believed facts retrieved). Within one page the sweep reads a single snapshot (REPEATABLE READ),
    so the retrieval is a function of the first four; the key is exactly those four.
    """

    def __init__(self, reasoner=None):
        self.calls = 0
        self.reasoner = reasoner  # None: the configured one (UNSAY_REASONER)
        self._cache: dict[tuple, object] = {}
        self._dispensed: dict[int, frozenset] = {}

    def reset(self):
        self._cache.clear()
        self._dispensed.clear()

    def preload(self, patient_ids):
        from patients.models import DispensingRecord

        rows: dict[int, list] = {pid: [] for pid in patient_ids if pid not in self._dispensed}
        if not rows:
            return
        # Lots, NDCs (drug-level recalls are narrowed by NDC product) and dispensing dates (closed
        # drug-level recalls) are inputs; ids and fingerprints are what the decision records.
        for pid, drug, lot, ndc, at, row_id, fingerprint in DispensingRecord.objects.filter(
                patient_id__in=list(rows)).values_list("patient_id", "drug", "lot", "ndc", "dispensed_at", "id",
                                                       "fingerprint"):
            rows[pid].append((drug, lot, ndc, at, row_id, fingerprint))
        self._dispensed.update(rows)

    def preload_from(self, beliefs):
        """The same rows, from a ask.beliefs.PageBeliefs that has read them already."""
        for pid, records in beliefs.records.items():
            if pid not in self._dispensed:
                self._dispensed[pid] = [(r.drug, r.lot, r.ndc, r.dispensed_at, r.id, r.fingerprint)
                                        for r, _product in records]

    def inputs_key(self, patient, question: str, subject: str) -> tuple:
        self.preload([patient.pk])
        dispensed = self._dispensed[patient.pk]
        drugs = frozenset(d for d, *_ in dispensed)
        contents = frozenset((lot, ndc, at) for d, lot, ndc, at, _i, _f in dispensed if not subject or d == subject)
        return (_question_key(question), subject or "", contents, drugs)

    def decide(self, patient, question: str, subject: str, *, beliefs=None):
        """(outcome, shared). `beliefs`: what decide() reads from (ask.beliefs; None: the database)."""
        from ask.services import decide, rebind_inputs

        key = self.inputs_key(patient, question, subject)
        cached = self._cache.get(key)
        if cached is not None:
            # Same verdict and reads; the dispensing rows it rests on are this patient's own.
            rows = [(i, f) for d, _l, _n, _a, i, f in self._dispensed[patient.pk] if d == subject]
            return rebind_inputs(cached, question, rows), True
        self.calls += 1
        outcome = decide(patient, question, subject=subject or None, reasoner=self.reasoner, beliefs=beliefs)
        self._cache[key] = outcome
        return outcome, False


def _set_page_snapshot():
    if connection.vendor == "postgresql":
        # One snapshot per page: identical inputs really do see identical beliefs.
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


# --- one decision ---------------------------------------------------------------------------


def _page_reasons(decisions, scope: Scope, *, raw=None) -> dict[int, dict]:
    """decision id -> {"retracted": [fact], "new": [fact], "dispensing": bool} for one page.
    `raw`: staleness.StaleReason lists already read for these decisions."""
    reasons = raw if raw is not None else staleness.stale_reasons([d.id for d in decisions], scope)
    fact_ids = {r.fact_id for rs in reasons.values() for r in rs if r.fact_id}
    facts = Fact.objects.defer("embedding").in_bulk(list(fact_ids))
    out = {}
    for decision_id, rs in reasons.items():
        out[decision_id] = {
            "retracted": [facts[r.fact_id] for r in rs if r.kind == staleness.RETRACTED_READ],
            "new": [facts[r.fact_id] for r in rs if r.kind == staleness.NEW_FACT],
            "dispensing": any(r.kind == staleness.DISPENSING_CHANGED for r in rs),
        }
    return out


def _pick_trigger(reasons: dict, latest: dict) -> tuple[Fact | None, Fact | None]:
    """(previous, trigger): what the patient's answer rested on and what is believed now, the most
    severe change first. A retracted read pairs with its current version; a new fact has no
    previous; a dispensing change alone has neither. `latest` caches latest_version per page."""
    pairs = []
    for old in reasons["retracted"]:
        if old.id not in latest:
            latest[old.id] = latest_version(old)
        pairs.append((old, latest[old.id]))
    pairs.extend((None, new) for new in reasons["new"])
    if not pairs:
        return None, None
    pairs.sort(key=lambda p: (severity(p[1]), is_active(p[1]), (p[1] or p[0]).id), reverse=True)
    return pairs[0]


def _pending_corrections(decision_ids, *, lock: bool) -> dict[int, Correction]:
    """Drafts (or approved but unsent corrections) that produced these decisions, by decision id:
    the patient has not heard them yet. One query per page."""
    qs = Correction.objects.select_for_update(of=("self",)) if lock else Correction.objects
    found = (qs.select_related("old_decision", "previous_fact").defer("previous_fact__embedding")
             .filter(new_decision_id__in=list(decision_ids),
                     status__in=[Correction.Status.DRAFT, Correction.Status.APPROVED]))
    return {c.new_decision_id: c for c in found}


def mark_stale(correction: Correction, *, replaced_by: Correction | None = None, run=None, note="") -> bool:
    """Stale a draft before it is sent. Returns False when its message is already out of our hands."""
    cancelled = OutboxMessage.objects.filter(
        correction=correction, status__in=[OutboxMessage.Status.HELD, OutboxMessage.Status.READY]
    ).update(status=OutboxMessage.Status.CANCELLED, last_error="stale: superseded before sending")
    has_message = OutboxMessage.objects.filter(correction=correction).exists()
    if has_message and not cancelled:
        return False
    before = {"status": correction.status}
    correction.status = Correction.Status.STALE
    correction.save(update_fields=["status", "updated"])
    AuditEvent.objects.create(actor_label=SWEEP_ACTOR, action=AuditEvent.Action.STALE, correction=correction,
                              sweep_run=run, before=before, after={"status": correction.status}, note=note)
    return True


def _write_draft(*, kind, patient, match, trigger, previous, old_decision, new_decision, old_verdict, old_answer,
                 new_verdict, new_answer, key, text, run, replaces=None, match_class="") -> Correction:
    attrs = ((trigger or previous).attributes or {}) if (trigger or previous) else {}
    correction = Correction.objects.create(
        kind=kind, patient=patient, region=patient.region, match=match, match_class=match_class,
        recall_number=attrs.get("recall_number", ""),
        classification=attrs.get("classification", ""), severity=severity(trigger or previous),
        old_decision=old_decision, new_decision=new_decision, old_verdict=old_verdict, old_answer=old_answer,
        new_verdict=new_verdict, new_answer=new_answer, trigger_fact=trigger, previous_fact=previous,
        diff=fact_diff(previous, trigger), drafted_text=text, dedupe_key=key, sweep_run=run, replaces=replaces,
    )
    channel = patient.preferred_channel
    recipient = patient.phone if channel == "sms" else patient.email
    OutboxMessage.objects.create(
        correction=correction, region=patient.region, channel=channel, recipient=recipient or "",
        subject=f"Update about your {correction.recall_number and 'recalled ' or ''}medicine"[:200],
        body=text, dedupe_key=key, status=OutboxMessage.Status.HELD,
    )
    AuditEvent.objects.create(
        actor_label=SWEEP_ACTOR, action=AuditEvent.Action.DRAFTED, correction=correction, decision=new_decision,
        sweep_run=run, before={"verdict": old_verdict}, after={"verdict": new_verdict, "status": correction.status},
    )
    return correction


def _change_token(trigger, previous, outcome) -> str:
    """What changed, for the dedupe key: the fact version believed now, a bare retraction, or the
    dispensing the new decision rests on."""
    if trigger is not None:
        return str(trigger.id)
    if previous is not None:
        return f"retracted-{previous.id}"
    return f"inputs-{outcome.inputs_hash}"


def _redecide(decision, reasons, decider, run, report, *, dry_run, pending, latest, drafted_keys):
    previous, trigger = _pick_trigger(reasons, latest)
    outcome, shared = decider.decide(decision.patient, decision.question, decision.subject)
    token = _change_token(trigger, previous, outcome)
    # A dispensing change has no fact of its own: the letter is about the most severe fact the new
    # answer rests on.
    if trigger is None and previous is None:
        bearing = [r.fact for r in outcome.retrieved if r.fact.id in outcome.load_bearing_ids]
        trigger = max(bearing, key=lambda f: (severity(f), f.id), default=None)
    recall_number = ((trigger or previous).attributes or {}).get("recall_number", "") if (trigger or previous) else ""
    # If this decision came from a correction the patient has not received yet, that draft goes
    # stale, and the comparison is with what the patient was actually told before it.
    replaced = None
    if pending is not None and (dry_run or mark_stale(pending, run=run, note=f"decision {decision.id} re-decided")):
        replaced = pending
    told = replaced.old_decision if replaced else decision
    told_verdict = replaced.old_verdict if replaced else decision.verdict
    told_answer = replaced.old_answer if replaced else decision.answer
    if replaced is not None and replaced.previous_fact_id:
        previous = replaced.previous_fact
    changed = outcome.verdict != told_verdict
    # One live draft per patient, drug, new verdict and change, however many decisions they hold.
    key = dedupe_key("correction", decision.patient_id, decision.subject, outcome.verdict, token)
    coalesced = False
    if changed:
        earlier = None if key in drafted_keys else Correction.objects.filter(dedupe_key=key).values_list(
            "status", flat=True).first()
        if key in drafted_keys or earlier in LIVE_STATUSES:
            coalesced = True
        elif earlier is not None:  # that draft went stale or was rejected: this is a new message
            key = dedupe_key(key, "decision", decision.id)
    report.examined += 1
    if changed:
        report.corrected += 1
    else:
        report.reaffirmed += 1
    if dry_run:
        if not coalesced:
            report.preview.append({
                "decision": decision.id, "patient": str(decision.patient), "question": decision.question,
                "old_verdict": told_verdict, "new_verdict": outcome.verdict, "changed": changed,
                "recall_number": recall_number,
            })
            drafted_keys.add(key)
        return
    from ask.services import record_outcome

    new_decision = record_outcome(outcome, patient=decision.patient, question=decision.question, replaces=decision)
    if changed and not coalesced:
        text = correction_text(decision.patient, told_verdict, outcome, trigger or previous, previous)
        _write_draft(kind=Correction.Kind.CORRECTION, patient=decision.patient, match=Correction.Match.ASKED,
                     trigger=trigger, previous=previous, old_decision=told, new_decision=new_decision,
                     old_verdict=told_verdict, old_answer=told_answer, new_verdict=outcome.verdict,
                     new_answer=outcome.answer, key=key, text=text, run=run, replaces=replaced,
                     match_class=match_class_for(decision.patient, decision.subject,
                                                 [r.fact for r in outcome.retrieved
                                                  if r.fact.id in outcome.load_bearing_ids]))
    Redecision.objects.create(
        old_decision=decision, new_decision=new_decision,
        outcome=Redecision.Outcome.CORRECTED if changed else Redecision.Outcome.REAFFIRMED,
        recall_number=recall_number, trigger_fact=trigger, sweep_run=run, shared=shared or coalesced,
    )
    if changed:
        drafted_keys.add(key)  # only once every write of this decision succeeded


def _process_page(ids_after, limit, scope: Scope, decider, run, page_no, *, dry_run,
                  caches=None, among=None) -> tuple[SweepReport, int, int]:
    """Lock, re-decide and write one page. Returns (report, last id, rows in page).

    `among`: the page's slice of the stale set read when the sweep began (its ids are checked again
    and locked here); None: the next keyset page of the stale set as it is now."""
    report = SweepReport()
    if not dry_run:
        _set_page_snapshot()
    decider.reset()
    if among is not None:
        ids, raw_reasons = staleness.lock_stale_among(among, scope, lock=not dry_run)
    else:
        ids = staleness.stale_decision_ids(after=ids_after, limit=limit, scope=scope, lock=not dry_run)
        raw_reasons = None
    if not ids:
        return report, (among[-1] if among else ids_after), 0
    decisions = list(Decision.objects.filter(id__in=ids).select_related("patient").order_by("id"))
    reasons = _page_reasons(decisions, scope, raw=raw_reasons)
    pending = _pending_corrections(ids, lock=not dry_run)
    calls_before = decider.calls
    if _set_based_page(decisions, reasons, pending, decider, run, page_no, report, dry_run=dry_run,
                       caches=caches):
        return _finish_page(report, decider, calls_before, run, ids, page_no)
    drafted_keys: set[str] = set()
    decider.preload({d.patient_id for d in decisions if d.patient_id})
    latest: dict[int, Fact | None] = {}
    for n, decision in enumerate(decisions):
        if n == len(decisions) // 2:
            _maybe_crash("mid_page", page_no)
        one = SweepReport()  # counted only once its writes succeeded
        try:
            if dry_run:
                _redecide(decision, reasons[decision.id], decider, run, one, dry_run=True,
                          pending=pending.get(decision.id), latest=latest, drafted_keys=drafted_keys)
            else:
                with transaction.atomic():  # savepoint: one bad decision does not sink the page
                    _redecide(decision, reasons[decision.id], decider, run, one, dry_run=False,
                              pending=pending.get(decision.id), latest=latest, drafted_keys=drafted_keys)
            report.add(one)
        except (DecisionAlreadySuperseded, IntegrityError) as exc:
            # Another sweep got there first (or the same draft already exists): already handled.
            log.info("decision %s already handled: %s", decision.id, exc)
            report.already_handled += 1
        except Exception as exc:  # noqa: BLE001 - recorded on the run; the decision stays standing
            log.exception("re-deciding decision %s failed", decision.id)
            report.errors += 1
            report.error_text.append(f"decision {decision.id}: {type(exc).__name__}: {exc}")
    return _finish_page(report, decider, calls_before, run, ids, page_no)


def _finish_page(report, decider, calls_before, run, ids, page_no):
    report.reasoner_calls += decider.calls - calls_before
    report.pages += 1
    if run is not None:
        _save_run_progress(run, report, last_id=ids[-1])
    _maybe_crash("before_commit", page_no)
    return report, ids[-1], len(ids)


def _set_based_page(decisions, reasons, pending, decider, run, page_no, report, *, dry_run, caches=None) -> bool:
    """The page as a set (corrections.sweep_pages), in a savepoint. False: take the per-decision
    path for this page (refused up front, or anything unusual rolled back)."""
    from . import sweep_pages

    why = sweep_pages.per_decision_reason(decider, decisions, pending, dry_run=dry_run)
    if why:
        if not dry_run:
            log.info("sweep page %d takes the per-decision path: %s", page_no, why)
        return False
    calls_before = decider.calls
    caches = caches or sweep_pages.SweepCaches()
    one = SweepReport()
    try:
        with transaction.atomic():
            plans, beliefs = sweep_pages.plan_page(decisions, reasons, decider,
                                                   fact_cache=caches.facts)
            _maybe_crash("mid_page", page_no)
            sweep_pages.write_page(plans, beliefs, run, one, letters=caches.letters)
    except (DecisionAlreadySuperseded, IntegrityError, sweep_pages.PageFallback) as exc:
        log.info("sweep page %d falls back to the per-decision path: %s", page_no, exc)
    except Exception:  # noqa: BLE001 - the per-decision path records the failure per decision
        log.exception("sweep page %d falls back to the per-decision path", page_no)
    else:
        one.set_pages = 1
        report.add(one)
        return True
    decider.calls = calls_before  # what the per-decision path calls is what counts
    decider.reset()
    return False


def _save_run_progress(run: SweepRun, delta: SweepReport, *, last_id: int | None = None):
    from django.db.models import F

    values = {name: F(name) + getattr(delta, name) for name in (
        "examined", "reaffirmed", "corrected", "notices", "already_handled", "reasoner_calls", "errors", "pages")}
    values["heartbeat"] = timezone.now()
    if last_id is not None:
        values["last_decision_id"] = last_id
    if delta.error_text:
        run.error_text = (run.error_text + "\n" + "\n".join(delta.error_text)).strip()[-10000:]
        values["error_text"] = run.error_text
    SweepRun.objects.filter(pk=run.pk).update(**values)


# --- notices to patients who never asked ---------------------------------------------------


def worsened_pairs(fact_ids=None) -> list[tuple[Fact, Fact]]:
    """(predecessor, believed version) for recall facts that got worse.

    With fact_ids: the successors of those retracted versions. Without: every believed recall
    version > 1 whose predecessor was milder (the periodic catch-all; dedupe keys make it idempotent).
    """
    pairs = []
    if fact_ids:
        olds = Fact.objects.filter(id__in=list(fact_ids), kind=Fact.Kind.RECALL).defer("embedding")
        for old in olds:
            new = latest_version(old)
            if new is not None and worsened(old, new):
                pairs.append((old, new))
    else:
        olds = (Fact.objects.filter(kind=Fact.Kind.RECALL, retracted_at__isnull=False, superseded_by__isnull=False,
                                    superseded_by__retracted_at__isnull=True)
                .select_related("superseded_by").defer("embedding", "superseded_by__embedding"))
        for old in olds:
            if worsened(old, old.superseded_by):
                pairs.append((old, old.superseded_by))
    return pairs


def _superseded_pending_notices(fact_ids=None):
    qs = Correction.objects.filter(
        kind=Correction.Kind.NOTICE, status__in=[Correction.Status.DRAFT, Correction.Status.APPROVED],
        trigger_fact__retracted_at__isnull=False,
    ).select_related("trigger_fact", "previous_fact").defer("trigger_fact__embedding", "previous_fact__embedding")
    if fact_ids:
        qs = qs.filter(trigger_fact_id__in=list(fact_ids))
    return qs


def new_recall_facts(fact_ids=None) -> list[Fact]:
    """Believed, active recall facts that no earlier version led to: a brand-new recall, a lot added
    to a recall, a key re-asserted after a retraction. With fact_ids: those among them. Without: those
    asserted in the last UNSAY_NOTICE_LOOKBACK_DAYS (the periodic catch-all; dedupe keys make it
    idempotent)."""
    qs = Fact.objects.believed().filter(kind=Fact.Kind.RECALL).defer("embedding")
    if fact_ids:
        qs = qs.filter(id__in=list(fact_ids))
    else:
        qs = qs.filter(asserted_at__gte=timezone.now() - timedelta(days=settings.UNSAY_NOTICE_LOOKBACK_DAYS))
    qs = qs.exclude(id__in=Fact.objects.filter(superseded_by__isnull=False).values("superseded_by_id"))
    return [fact for fact in qs.order_by("id") if is_active(fact)]


def notice_pairs(fact_ids=None) -> list[tuple[Fact | None, Fact]]:
    """(before, believed now) for recall facts that got worse or are new, plus (what the patient last
    heard of, believed now) for unsent notices whose fact version was superseded: still worse than
    before means a replacement notice."""
    pairs = {(old.id, new.id): (old, new) for old, new in worsened_pairs(fact_ids)}
    pairs.update({(0, new.id): (None, new) for new in new_recall_facts(fact_ids)})
    for notice in _superseded_pending_notices(fact_ids):
        current = latest_version(notice.trigger_fact)
        baseline = notice.previous_fact
        if current is not None and worsened(baseline, current):
            pairs.setdefault((baseline.id if baseline else 0, current.id), (baseline, current))
    return list(pairs.values())


def stale_superseded_notices(fact_ids=None, *, run=None) -> int:
    """Unsent notices about a superseded fact version that no replacement took over: stale, never sent."""
    staled = 0
    for notice in _superseded_pending_notices(fact_ids):
        def _stale(notice_id=notice.pk):
            fresh = Correction.objects.select_for_update().get(pk=notice_id)
            if fresh.status in (Correction.Status.DRAFT, Correction.Status.APPROVED):
                return mark_stale(fresh, run=run, note="the recall changed and no longer calls for this notice")
            return False
        staled += bool(run_in_transaction(_stale))
    return staled


def _exposed(fact: Fact):
    """[(patient, "lot"|"drug", match class)] from patients.services.exposed_patients."""
    from patients.services import Match, exposed_patients

    return [(e.patient, "lot" if e.match == Match.LOT else "drug", str(e.match_class or ""))
            for e in exposed_patients(fact)]


_MATCH_RANK = {"confirmed": 0, "probable": 1, "product_all_lots": 2, "candidate": 3}


def match_class_for(patient, subject: str, facts) -> str:
    """The strongest drugs.matching class between these recall facts and the patient's dispensing."""
    rows = list(patient.dispensings.filter(drug=subject)) if subject else []
    return strongest_match(rows, facts)


def strongest_match(rows, facts) -> str:
    """The strongest drugs.matching class between these facts and these dispensing rows."""
    from drugs.matching import match

    found = {str(m) for fact in facts if fact is not None for row in rows if (m := match(fact, row))}
    return min(found, key=_MATCH_RANK.get, default="")


def _patients_who_asked(patient_ids, fact: Fact) -> set[int]:
    """Of these patients, those with a standing decision resting on a scope this fact touches: the
    re-decision tells them (never both a correction and a notice, never neither)."""
    asked = set()
    scopes = list(fact.scopes or [])
    if not scopes:
        return asked
    for start in range(0, len(patient_ids), 5000):
        chunk = patient_ids[start:start + 5000]
        asked.update(Decision.objects.standing().filter(patient_id__in=chunk, premises__scope__in=scopes)
                     .values_list("patient_id", flat=True))
    return asked


def _draft_notices_for(previous: Fact | None, current: Fact, decider, run, report, *, dry_run, notice_no,
                       only_patients=None):
    # Unsent notices about an older version of this claim go stale; their patients were never told.
    stale_baseline: dict[int, Correction] = {}
    if not dry_run:
        for pending in Correction.objects.filter(
            kind=Correction.Kind.NOTICE, status__in=[Correction.Status.DRAFT, Correction.Status.APPROVED],
            trigger_fact__fact_key=current.fact_key, trigger_fact__retracted_at__isnull=False,
        ).select_related("previous_fact"):
            stale_baseline[pending.patient_id] = pending
    exposed = _exposed(current)
    if only_patients is not None:
        exposed = [e for e in exposed if e[0].id in only_patients]
    asked = _patients_who_asked([e[0].id for e in exposed], current)
    for patient, match, match_class in exposed:
        replaced = stale_baseline.get(patient.id)
        baseline = replaced.previous_fact if replaced else previous
        if not worsened(baseline, current) or patient.id in asked:
            continue
        question = f"Is my {current.subject} safe?"
        outcome, _shared = decider.decide(patient, question, current.subject)
        if outcome.verdict not in (Decision.Verdict.CAUTION, Decision.Verdict.STOP):
            continue  # the decision logic does not find this patient affected: nothing to tell them
        key = dedupe_key("notice", patient.id, outcome.verdict, current.id)
        if Correction.objects.filter(dedupe_key=key).exists():
            continue  # drafted or sent already: neither counted again nor redrafted
        if dry_run:
            report.notices += 1
            report.preview.append({"notice": True, "patient": str(patient), "match": match,
                                   "new_verdict": outcome.verdict, "recall_number": current.attributes.get(
                                       "recall_number", "")})
            continue

        def write(patient=patient, match=match, outcome=outcome, key=key, replaced=replaced, baseline=baseline,
                  match_class=match_class):
            replaced_ok = None
            if replaced is not None:
                fresh = Correction.objects.select_for_update().get(pk=replaced.pk)
                pending = fresh.status in (Correction.Status.DRAFT, Correction.Status.APPROVED)
                if pending and mark_stale(fresh, run=run, note=f"superseded by {current}"):
                    replaced_ok = fresh
            _write_draft(kind=Correction.Kind.NOTICE, patient=patient, match=match, trigger=current,
                         previous=baseline, old_decision=None, new_decision=None, old_verdict="", old_answer="",
                         new_verdict=outcome.verdict, new_answer=outcome.answer, key=key,
                         text=notice_text(patient, match, outcome, current), run=run, replaces=replaced_ok,
                         match_class=match_class)
            delta = SweepReport(notices=1)
            if run is not None:
                _save_run_progress(run, delta)
            return delta

        try:
            report.add(run_in_transaction(write))
        except IntegrityError:
            report.already_handled += 1  # a concurrent sweep wrote this notice first
        notice_no[0] += 1
        _maybe_crash("mid_notices", notice_no[0])


# --- entry point ----------------------------------------------------------------------------


def abandon_dead_runs() -> int:
    """Runs still 'running' whose heartbeat stopped (the process was killed): mark them failed so the
    operations page stops showing them as live. Their work is not lost: the stale set still has it."""
    cutoff = timezone.now() - timedelta(seconds=env_int("UNSAY_SWEEP_HEARTBEAT_TIMEOUT", 600, minimum=1))
    return SweepRun.objects.filter(status=SweepRun.Status.RUNNING, heartbeat__lt=cutoff).update(
        status=SweepRun.Status.FAILED, finished=timezone.now(),
        error_text="abandoned: no heartbeat (process killed?); a later sweep picks up its remaining work")


def page_size_default() -> int:
    return env_int("UNSAY_SWEEP_PAGE_SIZE", 200, minimum=1, maximum=10000)


def recall_facts_for_patients(patient_ids) -> list[Fact]:
    """Active recall facts that cover a dispensing of these patients (the same matching as exposure)."""
    from patients.models import DispensingRecord
    from patients.services import active_recalls_for_dispensing

    facts: dict[int, Fact] = {}
    for record in DispensingRecord.objects.filter(patient_id__in=list(patient_ids)).select_related("patient"):
        for fact in active_recalls_for_dispensing(record):
            facts[fact.id] = fact
    return [facts[i] for i in sorted(facts)]


def sweep(*, fact_ids=None, patient_ids=None, trigger=SweepRun.Trigger.MANUAL, dry_run=False, page_size=None,
          progress=None, notices=True) -> SweepReport:
    """Sweep the stale set — all of it, or what changed facts (`fact_ids`: retracted and new
    versions) and changed dispensing (`patient_ids`) touch — then draft notices for exposed patients
    with no standing answer.

    dry_run re-decides without writing anything (no decisions, drafts or run row) and returns a preview.
    progress: optional callable(n) called with the number of decisions in each committed page.
    """
    scope = Scope.of(fact_ids, patient_ids)
    fact_ids = list(scope.fact_ids) if scope.fact_ids else None
    page_size = page_size or page_size_default()
    total = SweepReport()
    run = None
    if not dry_run:
        abandon_dead_runs()
        run = SweepRun.objects.create(trigger=trigger, fact_ids=fact_ids or [],
                                      patient_ids=list(scope.patient_ids or []), heartbeat=timezone.now())
        total.run = run
    decider = SharedDecider()
    from .sweep_pages import SweepCaches

    caches = SweepCaches()  # fact versions and letters, shared by the set-based pages
    after, page_no = 0, 0
    # The stale set as the sweep begins, read once; pages lock and re-check their slice of it. Then
    # keyset pages of the stale set past its last id (usually empty: what went stale meanwhile).
    planned, position = staleness.all_stale_ids(scope), 0
    try:
        while True:
            page_no += 1
            among = None
            if position < len(planned):
                among = planned[position:position + page_size]
                position += len(among)
                after = among[0] - 1
            elif planned:
                planned, after = [], planned[-1]  # then onwards, as before: never back over a page
            if dry_run:
                report, after, rows = _process_page(after, page_size, scope, decider, None, page_no, dry_run=True,
                                                    among=among)
            else:
                report, after, rows = run_in_transaction(
                    _process_page, after, page_size, scope, decider, run, page_no, dry_run=False,
                    caches=caches, among=among)
                _maybe_crash("after_commit", page_no)
            total.add(report)
            if progress and rows:
                progress(rows)
            if among is None and rows < page_size:
                break
        if notices:
            notice_no = [0]
            decider.reset()
            calls_before = decider.calls
            notice_report = SweepReport()
            if scope.fact_ids or scope.everything:
                for previous, current in notice_pairs(fact_ids):
                    _draft_notices_for(previous, current, decider, run, notice_report, dry_run=dry_run,
                                       notice_no=notice_no)
            if scope.patient_ids:
                # Dispensing registered or corrected after a recall: the patient may never have asked.
                for current in recall_facts_for_patients(scope.patient_ids):
                    _draft_notices_for(None, current, decider, run, notice_report, dry_run=dry_run,
                                       notice_no=notice_no, only_patients=set(scope.patient_ids))
            if not dry_run and not scope.patient_ids:
                stale_superseded_notices(fact_ids, run=run)
            notice_report.reasoner_calls = decider.calls - calls_before
            if run is not None and notice_report.reasoner_calls:
                _save_run_progress(run, SweepReport(reasoner_calls=notice_report.reasoner_calls,
                                                    already_handled=notice_report.already_handled))
            total.add(notice_report)
    except BaseException as exc:
        if run is not None:
            SweepRun.objects.filter(pk=run.pk).update(
                status=SweepRun.Status.FAILED, finished=timezone.now(),
                error_text=(f"{type(exc).__name__}: {exc}")[:10000])
        raise
    if run is not None:
        SweepRun.objects.filter(pk=run.pk).update(status=SweepRun.Status.FINISHED, finished=timezone.now(),
                                                  heartbeat=timezone.now())
        run.refresh_from_db()
    return total


def has_work(fact_ids=None, patient_ids=None) -> bool:
    """Cheap pre-check for the after-commit triggers: anything to re-decide or notify?"""
    if stale_decision_ids(limit=1, fact_ids=fact_ids, patient_ids=patient_ids):
        return True
    if patient_ids:
        return bool(recall_facts_for_patients(patient_ids))
    return bool(worsened_pairs(fact_ids)) or bool(new_recall_facts(fact_ids))
