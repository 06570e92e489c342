"""Decisions: recorded with their read set (load-bearing or not), premises and inputs in one transaction;
replayed later from belief time."""

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from memory import premise_sets, read_sets
from memory.models import Decision, DecisionInput, Fact


@dataclass
class ReadSpec:
    fact: Fact
    rank: int
    score: float
    load_bearing: bool = False


def inputs_fingerprint(question: str, patient_lots, fact_versions) -> str:
    """Identical inputs (question, this patient's lots, fact versions read) give identical fingerprints."""
    payload = json.dumps(
        {"q": " ".join(question.lower().split()), "lots": sorted(set(patient_lots)),
         "facts": sorted(fact_versions)},
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def record_decision(*, question: str, verdict: str, answer: str, reasoner: str, reads: list[ReadSpec],
                    patient=None, subject: str = "", reasoner_verdict: str = "", guardrail_override: str = "",
                    inputs_hash: str = "", replaces: Decision | None = None, at: datetime | None = None,
                    premises=(), inputs=()) -> Decision:
    """Write a decision and its whole read set atomically (the set only when its content is new). If
    `replaces` is given it must still be standing; it becomes superseded and the new decision points to it.

    `premises`: the scopes whose believed facts the decision took into account (drugs.scopes);
    `inputs`: (dispensing id, fingerprint) of every dispensing row of the drug it used. Both are
    what the sweep's stale set joins on when a fact is asserted or a dispensing changes later.

    Runs inside the caller's transaction when there is one (the sweep writes decision, correction
    and outbox together); callers at the top level should wrap it in run_in_transaction.
    """
    if verdict not in Decision.Verdict.values:
        raise ValueError(f"Unknown verdict {verdict!r}.")
    reads = list(reads)
    for spec in reads:
        if spec.fact is None or spec.fact.pk is None:
            raise ValueError("Every read must name a stored fact version.")
    now = at or timezone.now()
    members = read_sets.members_of(reads)
    with transaction.atomic():
        if replaces is not None:
            updated = Decision.objects.filter(pk=replaces.pk, status=Decision.Status.STANDING).update(
                status=Decision.Status.SUPERSEDED, superseded_at=now)
            if updated != 1:
                raise DecisionAlreadySuperseded(f"Decision {replaces.pk} is no longer standing.")
        decision = Decision.objects.create(
            patient_id=getattr(patient, "pk", None), region=getattr(patient, "region", "") or "",
            question=question, subject=subject,
            verdict=verdict, answer=answer, reasoner=reasoner, reasoner_verdict=reasoner_verdict,
            guardrail_override=guardrail_override, inputs_hash=inputs_hash, replaces=replaces, decided_at=now,
            read_set_id=read_sets.store_one(members), premise_set_id=premise_sets.store_one(premises),
        )
        DecisionInput.objects.bulk_create(
            [DecisionInput(decision=decision, dispensing_id=dispensing_id, fingerprint=fingerprint)
             for dispensing_id, fingerprint in sorted(set(inputs))])
    # The caller's patient rides along, as patients.selectors.attach_patients sets it on decisions read back.
    decision.patient = patient
    return decision


class DecisionAlreadySuperseded(Exception):
    """Another process re-decided this decision first (two sweeps racing)."""


def replay_decision(decision_id: int) -> dict:
    """The read set as it was at decision time: each fact version's content then, whether it
    is retracted now (when, why, by which version) and what the key's believed version says now."""
    decision = Decision.objects.get(pk=decision_id)
    reads_qs = decision.reads.select_related("fact", "fact__superseded_by").defer(
        "fact__embedding", "fact__superseded_by__embedding").order_by("rank")
    reads = list(reads_qs)
    believed_now = {
        f.fact_key: f
        for f in Fact.objects.believed().filter(fact_key__in={r.fact_key for r in reads}).defer("embedding")
    }
    rows = []
    for read in reads:
        fact = read.fact
        current = believed_now.get(read.fact_key)
        rows.append({
            "rank": read.rank, "fact_id": fact.id, "fact_key": read.fact_key, "version": read.fact_version,
            "load_bearing": read.load_bearing, "score": read.score, "statement": fact.statement,
            "attributes": fact.attributes, "asserted_at": fact.asserted_at, "retracted_at": fact.retracted_at,
            "retraction_reason": fact.retraction_reason,
            "believed_at_decision": fact.asserted_at <= decision.decided_at
            and (fact.retracted_at is None or fact.retracted_at > decision.decided_at),
            "retracted_now": fact.retracted_at is not None,
            "superseded_by_version": fact.superseded_by.version if fact.superseded_by_id else None,
            "believed_now_version": current.version if current else None,
            "believed_now_statement": current.statement if current else None,
        })
    return {
        "decision": decision,
        "reads": rows,
        "stale": any(r["retracted_now"] for r in rows if r["load_bearing"]),
    }


ERASED_TEXT = "[erased on request]"


def redact_patient_decisions(patient_id: int) -> int:
    """A patient's questions and answers replaced on erasure (privacy.services): the free text may name
    them. Verdicts, subjects, read sets and premise sets stay, so replay still says what was believed."""
    return Decision.objects.filter(patient_id=patient_id).update(question=ERASED_TEXT, answer=ERASED_TEXT)
