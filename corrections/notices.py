"""Notices: exposed patients who never asked (no standing decision about the drug) get a draft when a
recall touching their dispensing is new or got worse; a notice about a superseded version is staled."""

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from core.retry import run_in_transaction
from drugs.recall_terms import is_active, severity
from memory.models import Decision, Fact

from . import faults
from .drafting import notice_text
from .drafts import notice_key, write_draft
from .models import Correction
from .redecide import SweepReport, latest_version, mark_stale, save_run_progress, worsened


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


def superseded_pending_notices(fact_ids=None):
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
    heard of, believed now) for unsent notices whose fact version was superseded, whatever the new
    version says (closed included): draft_notices_for decides per patient whether it replaces them."""
    pairs = {(old.id, new.id): (old, new) for old, new in worsened_pairs(fact_ids)}
    pairs.update({(0, new.id): (None, new) for new in new_recall_facts(fact_ids)})
    for notice in superseded_pending_notices(fact_ids):
        current = latest_version(notice.trigger_fact)
        baseline = notice.previous_fact
        if current is not None and current.kind == Fact.Kind.RECALL:
            pairs.setdefault((baseline.id if baseline else 0, current.id), (baseline, current))
    return list(pairs.values())


def still_news(baseline: Fact | None, current: Fact) -> bool:
    """Whether an unsent notice's replacement tells the patient something they have not heard: they
    never heard of this recall, or it is now of a graver class than what they heard. Closing a recall
    does not end it for a patient who holds the recalled lot, so a closed version still counts."""
    return baseline is None or worsened(baseline, current) or severity(current) > severity(baseline)


def stale_superseded_notices(fact_ids=None, *, run=None) -> int:
    """Unsent notices about a superseded fact version that no replacement took over: stale, never sent."""
    staled = 0
    for notice in superseded_pending_notices(fact_ids):
        def _stale(notice_id=notice.pk):
            fresh = Correction.objects.select_for_update().get(pk=notice_id)
            if fresh.status in (Correction.Status.DRAFT, Correction.Status.APPROVED):
                return mark_stale(fresh, run=run, note="the recall changed and no longer calls for this notice")
            return False
        staled += bool(run_in_transaction(_stale))
    return staled


def exposed_patients_of(fact: Fact, *, who_never_asked: bool = False):
    """[(patient, "lot"|"drug", match class, dispensing rows that matched)] from
    patients.services.exposed_patients; who_never_asked: without the rows whose patient has a standing
    decision about that medicine resting on a scope this fact touches, in the same query: their
    re-decision tells them (never both a correction and a notice, never neither)."""
    from patients.services import Match, exposed_patients

    unless = list(fact.scopes or []) if who_never_asked else None
    return [(e.patient, "lot" if e.match == Match.LOT else "drug", str(e.match_class or ""), e.dispensings)
            for e in exposed_patients(fact, unless_standing_on=unless)]


def notice_question(rows) -> tuple[str, str]:
    """(question, subject) a notice is decided with: about the medicine as it was dispensed (the matched
    row's own identity and the text the pharmacy typed), never the recall's name for it: a pack typed
    "LOSART POT 50MG TAB" with the recalled NDC and lot is this patient's losartan, whatever the recall
    calls it."""
    from drugs.identity import readable

    row = next((r for r in rows if r.drug), rows[0] if rows else None)
    subject = row.drug if row is not None else ""
    named = ((row.drug_text or "").strip() if row is not None else "") or readable(subject) or "medicine"
    return f"Is my {named} safe?", subject


def draft_notices_for(previous: Fact | None, current: Fact, decider, run, report, *, dry_run, notice_no,
                       only_patients=None):
    # Unsent notices about an older version of this claim go stale; their patients were never told.
    stale_baseline: dict[int, Correction] = {}
    if not dry_run:
        for pending in Correction.objects.filter(
            kind=Correction.Kind.NOTICE, status__in=[Correction.Status.DRAFT, Correction.Status.APPROVED],
            trigger_fact__fact_key=current.fact_key, trigger_fact__retracted_at__isnull=False,
        ).select_related("previous_fact"):
            stale_baseline[pending.patient_id] = pending
    # Those who asked are told by their re-decision (never both a correction and a notice): one
    # anti-join leaves them out, so a recall that touches thousands who asked builds none of them.
    exposed = exposed_patients_of(current, who_never_asked=True)
    if only_patients is not None:
        exposed = [e for e in exposed if e[0].id in only_patients]
    for patient, match, match_class, rows in exposed:
        replaced = stale_baseline.get(patient.id)
        baseline = replaced.previous_fact if replaced else previous
        # A pending notice the patient never received is replaced in the same transaction whenever
        # they are still exposed and it is still news (a recall closed since, included): staling it
        # alone would leave them silent.
        if not (still_news(baseline, current) if replaced else worsened(baseline, current)):
            continue
        question, subject = notice_question(rows)
        outcome, _shared = decider.decide(patient, question, subject or current.subject)
        if outcome.verdict not in (Decision.Verdict.CAUTION, Decision.Verdict.STOP):
            continue  # the decision logic does not find this patient affected: nothing to tell them
        key = notice_key(patient.id, outcome.verdict, current.id)
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
            write_draft(kind=Correction.Kind.NOTICE, patient=patient, match=match, trigger=current,
                         previous=baseline, old_decision=None, new_decision=None, old_verdict="", old_answer="",
                         new_verdict=outcome.verdict, new_answer=outcome.answer, key=key,
                         text=notice_text(patient, match, outcome, current, match_class=match_class), run=run,
                         replaces=replaced_ok, match_class=match_class)
            delta = SweepReport(notices=1)
            if run is not None:
                save_run_progress(run, delta)
            return delta

        try:
            report.add(run_in_transaction(write))
        except IntegrityError:
            report.already_handled += 1  # a concurrent sweep wrote this notice first
        notice_no[0] += 1
        faults.maybe_crash("mid_notices", notice_no[0])


def recall_facts_for_patients(patient_ids) -> list[Fact]:
    """Active recall facts that cover a dispensing of these patients (the same matching as exposure)."""
    from patients.models import DispensingRecord
    from patients.services import active_recalls_for_dispensing

    facts: dict[int, Fact] = {}
    for record in DispensingRecord.objects.filter(patient_id__in=list(patient_ids)).select_related("patient"):
        for fact in active_recalls_for_dispensing(record):
            facts[fact.id] = fact
    return [facts[i] for i in sorted(facts)]
