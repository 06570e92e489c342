"""The per-decision path of a page: each stale decision re-decided through ask.services.decide (shared
between decisions with identical inputs, corrections.sweep.decider) and written through the ORM in a
savepoint of its own, a correction drafted where the verdict moved. corrections.sweep.pages writes the
same rows for a whole page; this path takes the pages it refuses or falls back from (a pending draft
to stale, a model reasoner, another engine, anything unusual) and every page of a dry run."""

import logging

from django.db import IntegrityError, transaction

from ask.services import record_outcome
from core.retry import is_retryable
from memory.decisions import DecisionAlreadySuperseded

from ..drafting import correction_text
from ..drafts import coalesce, draft_key, mark_stale, write_draft
from ..models import Correction, Redecision
from ..recall_letters import settle, situations
from . import faults
from .change import change_token, letter_fact, pick_trigger, strongest_match
from .report import SweepReport, reference_of
from .stale_page import StalePage

log = logging.getLogger(__name__)


def redecide_page(page: StalePage, decider, run, page_no: int, report: SweepReport, *, dry_run: bool):
    """Re-decide the page's decisions one by one, each in a savepoint: one that fails is recorded on
    the report and stays standing; one another sweep got to first counts as already handled. A
    retryable error (a conflict with another sweep) is raised: the whole page again, on a new snapshot."""
    drafted_keys: set[str] = set()
    decider.preload({d.patient_id for d in page.decisions if d.patient_id})
    latest: dict = {}
    for n, decision in enumerate(page.decisions):
        if n == len(page.decisions) // 2:
            faults.maybe_crash("mid_page", page_no)
        one = SweepReport()  # counted only once its writes succeeded
        try:
            if dry_run:
                redecide(decision, page.reasons[decision.id], decider, run, one, dry_run=True,
                         pending=page.pending.get(decision.id), latest=latest, drafted_keys=drafted_keys)
            else:
                with transaction.atomic():  # savepoint: one bad decision does not sink the page
                    redecide(decision, page.reasons[decision.id], decider, run, one, dry_run=False,
                             pending=page.pending.get(decision.id), latest=latest, drafted_keys=drafted_keys)
            report.add(one)
        except (DecisionAlreadySuperseded, IntegrityError) as exc:
            # Another sweep got there first (or the same draft already exists): already handled.
            log.info("decision %s already handled: %s", decision.id, exc)
            report.already_handled += 1
        except Exception as exc:  # noqa: BLE001 - recorded on the run; the decision stays standing
            if is_retryable(exc):
                # A conflict with another sweep (two writing the same new read set: memory.read_sets.store)
                # is no failure of this decision: the whole page again, on a new snapshot.
                raise
            log.exception("re-deciding decision %s failed", decision.id)
            report.errors += 1
            report.error_text.append(f"decision {decision.id}: {type(exc).__name__}: {exc}")


def redecide(decision, reasons, decider, run, report, *, dry_run, pending, latest, drafted_keys):
    previous, trigger = pick_trigger(reasons, latest)
    outcome, shared = decider.decide(decision.patient, decision.question, decision.subject)
    token = change_token(trigger, previous, outcome)
    trigger, dispensing_changed = letter_fact(trigger, previous, outcome)
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
    key = draft_key(decision.patient_id, decision.subject, outcome.verdict, token)
    coalesced = False
    if changed:
        earlier = None if key in drafted_keys else Correction.objects.filter(dedupe_key=key).values_list(
            "status", flat=True).first()
        key, coalesced = coalesce(key, earlier, drafted_keys, decision.id)
    report.examined += 1
    if changed:
        report.corrected += 1
    else:
        report.reaffirmed += 1
    if dry_run:
        if not coalesced:
            report.preview.append({
                "decision": decision.id, "patient_ref": reference_of(decision.patient), "question": decision.question,
                "old_verdict": told_verdict, "new_verdict": outcome.verdict, "changed": changed,
                "recall_number": recall_number,
            })
            drafted_keys.add(key)
        return
    new_decision = record_outcome(outcome, patient=decision.patient, question=decision.question, replaces=decision)
    drafted_about = None  # the recall of the correction that tells the patient of this change, if any
    if changed:
        drafted_about = ((trigger or previous).attributes or {}).get("recall_number", "") if (trigger or previous) \
            else ""
    if changed and not coalesced:
        match_class = match_class_for(decision.patient, decision.subject,
                                      [r.fact for r in outcome.retrieved if r.fact.id in outcome.load_bearing_ids])
        text = correction_text(decision.patient, told_verdict, outcome, trigger or previous, previous,
                               match_class=match_class, dispensing_changed=dispensing_changed)
        write_draft(kind=Correction.Kind.CORRECTION, patient=decision.patient, match=Correction.Match.ASKED,
                     trigger=trigger, previous=previous, old_decision=told, new_decision=new_decision,
                     old_verdict=told_verdict, old_answer=told_answer, new_verdict=outcome.verdict,
                     new_answer=outcome.answer, key=key, text=text, run=run, replaces=replaced,
                     match_class=match_class)
    if replaced is not None and replaced.recall_number and replaced.recall_number != drafted_about:
        report.notices += replace_with_notice(replaced, decision.patient, outcome, run)
    Redecision.objects.create(
        old_decision=decision, new_decision=new_decision,
        outcome=Redecision.Outcome.CORRECTED if changed else Redecision.Outcome.REAFFIRMED,
        recall_number=recall_number, trigger_fact=trigger, sweep_run=run, shared=shared or coalesced,
    )
    if changed:
        drafted_keys.add(key)  # only once every write of this decision succeeded


def replace_with_notice(replaced: Correction, patient, outcome, run) -> int:
    """A pending correction was staled and no correction about its recall took over (the verdict came
    back to what the app told the patient, or the new correction is about another recall): while they
    are still owed a letter about that recall, a notice replaces it in this transaction
    (corrections.recall_letters). Returns the notices drafted."""
    number = replaced.recall_number
    situation = situations([patient.pk], {number}).get((patient.pk, number))
    settled = settle(situation, outcome if situation is not None else None, patient=patient, recall_number=number,
                     run=run, replacing=replaced)
    return int(settled.drafted is not None)


def match_class_for(patient, subject: str, facts) -> str:
    """The strongest drugs.matching class between these recall facts and the patient's dispensing."""
    rows = [r.as_dispensed() for r in patient.dispensings.filter(drug=subject)] if subject else []
    return strongest_match(rows, facts)
