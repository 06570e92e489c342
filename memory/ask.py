"""Ask: "is my medicine safe?" -> a recorded Decision with its read set (docs/reasoning.md).

    decide(patient, question, *, subject=None, reasoner=None) -> Outcome     reads only
    record_outcome(outcome, *, patient, question, replaces=None) -> Decision  joins the caller's transaction
    ask(patient, question, *, subject=None, client=None) -> Decision       decide + record, caps, reuse
    usage_report() -> dict                                                  model-call counters for /health

Model calls are never made inside a database transaction (a retried transaction would call the
model again). Instead the decision is recorded in its own retried transaction that first takes a
share lock on every fact version it read and checks they are still believed: a retraction that
committed meanwhile makes us re-decide with the rules, and a retraction that comes later waits for
our commit, so the sweep always sees the decision it has to re-decide.
"""

import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone

from unsay_site.retry import run_in_transaction

from .guardrail import apply_guardrail
from .models import Decision, Fact, UsageCounter
from .reasoners import AskContext, RulesReasoner, get_reasoner, is_active
from .services import ReadSpec, Retrieved, inputs_fingerprint, record_decision, retrieve

log = logging.getLogger(__name__)

RETRIEVE_K = 12
# A "safe" verdict rests on every recall of the drug we know of. Retrieval's top-k can't hold them
# all (valsartan has over a hundred recalls), so the context also reads one believed fact of each
# other recall of the subject: an amended lot list or status re-versions every fact of a recall,
# which retracts the one we read and so triggers re-decision. Capped to bound the read set.
MAX_RECALLS_PER_SUBJECT = 100


@dataclass
class Outcome:
    verdict: str
    answer: str
    reasoner: str
    subject: str
    retrieved: list[Retrieved]
    load_bearing_ids: set[int]
    reasoner_verdict: str = ""
    guardrail_override: str = ""
    inputs_hash: str = ""
    patient_lots: list[str] = field(default_factory=list)

    def read_specs(self) -> list[ReadSpec]:
        return [ReadSpec(fact=r.fact, rank=rank, score=r.score, load_bearing=r.fact.id in self.load_bearing_ids)
                for rank, r in enumerate(self.retrieved, start=1)]


# --- subject and context ----------------------------------------------------------------------

def _words(text: str) -> str:
    return " " + " ".join(re.sub(r"[^a-z]+", " ", (text or "").lower()).split()) + " "


def patient_drugs(patient) -> list[str]:
    return sorted(set(patient.dispensings.values_list("drug", flat=True)))


def resolve_subject(patient, question: str, subject: str | None = None) -> tuple[str | None, str]:
    """(subject, "") or (None, question to ask back). Explicit subject wins; else a drug of the
    patient named in the question (longest name first); else their only drug."""
    from recalls.normalize import normalize_drug_name

    if subject:
        return normalize_drug_name(subject) or subject.strip().lower(), ""
    drugs = patient_drugs(patient)
    text = _words(question)
    named = [d for d in drugs if f" {d} " in text]
    # "amlodipine valsartan" contains "valsartan": keep the most specific names only.
    named = [d for d in named if not any(d != other and f" {d} " in f" {other} " for other in named)]
    if len(named) == 1:
        return named[0], ""
    if not named:
        partial = [d for d in drugs if any(f" {w} " in text for w in d.split() if len(w) > 3)]
        if len(partial) == 1:
            return partial[0], ""
        other = _other_drug_named(text, drugs)
        if other:
            # The question names a drug we have no dispensing of: answer about *that* drug (the
            # reasoner asks for the lot), never silently about the one drug we do have on file.
            return other, ""
        if len(drugs) == 1:
            return drugs[0], ""
    candidates = named or drugs
    if not candidates:
        return None, "We have no medicines on file for you. Which medicine are you asking about?"
    return None, f"Which medicine are you asking about: {', '.join(candidates)}?"


def _other_drug_named(text: str, drugs) -> str | None:
    """A drug we hold recall facts about that the question names (1–3 word phrases), other than
    the patient's own drugs; the longest name wins."""
    words = text.split()
    phrases = {" ".join(words[i:i + n]) for n in (3, 2, 1) for i in range(len(words) - n + 1)}
    phrases = {p for p in phrases if len(p) > 3} - set(drugs)
    if not phrases:
        return None
    known = Fact.objects.believed().filter(subject__in=phrases).values_list("subject", flat=True).distinct()
    return max(known, key=len, default=None)


def build_context(patient, question: str, subject: str) -> AskContext:
    dispensed = list(patient.dispensings.filter(drug=subject).values_list("lot", "ndc"))
    lots = sorted({lot for lot, _ in dispensed} - {""})
    retrieved = retrieve(question, subject=subject, lots=lots, k=RETRIEVE_K)
    if not any(r.fact.kind == Fact.Kind.RECALL and r.fact.subject == subject and r.fact.lot in lots
               and is_active(r.fact) for r in retrieved):
        # Only a verdict that may come out "safe" rests on the other recalls; with an active recall on
        # the patient's own lot it can't, and the read set stays small.
        retrieved += one_fact_per_other_recall(subject, retrieved)
    return AskContext(question=question, subject=subject, patient_lots=lots, patient_drugs=patient_drugs(patient),
                      retrieved=retrieved, patient_ndcs=sorted({ndc for _, ndc in dispensed}))


def one_fact_per_other_recall(subject: str, retrieved: list[Retrieved]) -> list[Retrieved]:
    """One believed fact (the lowest id) of each recall of `subject` that `retrieved` doesn't already cover."""
    covered = {(r.fact.attributes or {}).get("recall_number") for r in retrieved if r.fact.subject == subject}
    pick: dict[str, int] = {}
    rows = (Fact.objects.believed().filter(kind=Fact.Kind.RECALL, subject=subject)
            .exclude(id__in=[r.fact.id for r in retrieved]).order_by("id")
            .values_list("id", "attributes__recall_number"))
    for fact_id, recall_number in rows:
        if recall_number not in covered and recall_number not in pick:
            pick[recall_number] = fact_id
            if len(pick) >= MAX_RECALLS_PER_SUBJECT:
                log.warning("subject %s has more than %d recalls; the read set is capped", subject, len(pick))
                break
    facts = Fact.objects.defer("embedding").in_bulk(list(pick.values()))
    return [Retrieved(facts[i], 0.9, "subject") for i in sorted(pick.values())]


def _fingerprint(ctx: AskContext) -> str:
    return inputs_fingerprint(ctx.question, ctx.patient_lots,
                              [f"{r.fact.fact_key}@{r.fact.version}" for r in ctx.retrieved])


def _unknown_outcome(question_back: str) -> Outcome:
    return Outcome(verdict=Decision.Verdict.UNKNOWN, answer=question_back, reasoner=RulesReasoner().identity,
                   subject="", retrieved=[], load_bearing_ids=set())


def _finish(ctx: AskContext, result) -> Outcome:
    guarded = apply_guardrail(ctx, result)
    return Outcome(verdict=guarded.verdict, answer=guarded.answer, reasoner=result.reasoner[:100], subject=ctx.subject,
                   retrieved=ctx.retrieved, load_bearing_ids=guarded.load_bearing_ids,
                   reasoner_verdict=guarded.reasoner_verdict, guardrail_override=guarded.guardrail_override,
                   inputs_hash=_fingerprint(ctx), patient_lots=ctx.patient_lots)


# --- contract ---------------------------------------------------------------------------------

def decide(patient, question, *, subject=None, reasoner=None, client=None) -> Outcome:
    """Resolve the subject, retrieve, run the reasoner, apply the guardrail. Writes no decision.

    A model reasoner's call is counted against the caps first (the sweep's re-decisions count under
    `client`, default the internal scope); past a cap the rules reasoner answers, marked as such."""
    resolved, question_back = resolve_subject(patient, question, subject)
    if resolved is None:
        return _unknown_outcome(question_back)
    ctx = build_context(patient, question, resolved)
    chosen = get_reasoner(reasoner)
    if chosen.uses_model:
        granted, why = reserve_model_call(client)
        if not granted:
            chosen = RulesReasoner(note=f"model cap reached: {why}")
    return _finish(ctx, chosen.decide(ctx))


def record_outcome(outcome: Outcome, *, patient, question, replaces=None) -> Decision:
    """Write the decision and its read set; joins the caller's transaction."""
    return record_decision(
        question=question, verdict=outcome.verdict, answer=outcome.answer, reasoner=outcome.reasoner,
        reads=outcome.read_specs(), patient=patient, subject=outcome.subject,
        reasoner_verdict=outcome.reasoner_verdict, guardrail_override=outcome.guardrail_override,
        inputs_hash=outcome.inputs_hash, replaces=replaces,
    )


def reads_still_believed(outcome: Outcome) -> bool:
    """Share-lock the fact versions read and check none was retracted since we read it. Must run in
    a transaction; a retraction committing after this waits for our commit."""
    ids = sorted({r.fact.id for r in outcome.retrieved})
    if not ids:
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM memory_fact WHERE id = ANY(%s) AND retracted_at IS NULL ORDER BY id FOR SHARE", [ids]
        )
        return len(cursor.fetchall()) == len(ids)


def _record_fresh(outcome: Outcome, *, patient, question, subject) -> Decision:
    """In one transaction: lock the reads; if one went stale, re-decide with the rules (a few times) and record."""
    for _attempt in range(5):
        if reads_still_believed(outcome):
            return record_outcome(outcome, patient=patient, question=question)
        log.info("facts changed while deciding for patient %s; re-deciding with the rules", patient.pk)
        outcome = decide(patient, question, subject=subject or outcome.subject or None,
                         reasoner=RulesReasoner(note="facts changed while deciding"))
    raise RuntimeError("facts kept changing while deciding; giving up")


def ask(patient, question, *, subject=None, client=None) -> Decision:
    """decide + record_outcome, with the model-call caps and the reuse window."""
    question = (question or "").strip()
    if not question:
        raise ValueError("A question is required.")
    reasoner = get_reasoner()
    if not reasoner.uses_model:
        def _decide_and_record():
            outcome = decide(patient, question, subject=subject, reasoner=reasoner)
            return _record_fresh(outcome, patient=patient, question=question, subject=subject)
        return run_in_transaction(_decide_and_record)

    resolved, question_back = resolve_subject(patient, question, subject)
    if resolved is None:
        outcome = _unknown_outcome(question_back)
    else:
        ctx = build_context(patient, question, resolved)
        reused = reusable_decision(patient, _fingerprint(ctx))
        if reused is not None:
            return reused
        granted, why = reserve_model_call(client)
        if not granted:
            reasoner = RulesReasoner(note=f"model cap reached: {why}")
        outcome = _finish(ctx, reasoner.decide(ctx))
    return run_in_transaction(_record_fresh, outcome, patient=patient, question=question, subject=subject)


def reusable_decision(patient, inputs_hash: str) -> Decision | None:
    """A standing decision for the same patient and identical inputs within UNSAY_ASK_REUSE_SECONDS."""
    if settings.UNSAY_ASK_REUSE_SECONDS <= 0:
        return None
    since = timezone.now() - timedelta(seconds=settings.UNSAY_ASK_REUSE_SECONDS)
    return (Decision.objects.standing().filter(patient=patient, inputs_hash=inputs_hash, decided_at__gte=since)
            .order_by("-decided_at").first())


# --- cost controls ----------------------------------------------------------------------------

def _windows(now=None):
    now = now or timezone.now()
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    hour = now.replace(minute=0, second=0, microsecond=0)
    return day, hour


def client_scope(client) -> str:
    return f"client:{client.pk}" if client is not None else "client:internal"


def _take(scope: str, window_start, cap: int) -> bool:
    """Atomically count one call in (scope, window) unless the count has reached cap."""
    if cap <= 0:
        return False

    def _upsert():
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                INSERT INTO {UsageCounter._meta.db_table} (scope, window_start, n) VALUES (%s, %s, 1)
                ON CONFLICT (scope, window_start) DO UPDATE SET n = {UsageCounter._meta.db_table}.n + 1
                WHERE {UsageCounter._meta.db_table}.n < %s
                RETURNING n
                """,
                [scope, window_start, cap],
            )
            return cursor.fetchone() is not None

    return run_in_transaction(_upsert) if not connection.in_atomic_block else _upsert()


def _give_back(scope: str, window_start):
    UsageCounter.objects.filter(scope=scope, window_start=window_start, n__gt=0).update(n=F("n") - 1)


def reserve_model_call(client=None, *, now=None) -> tuple[bool, str]:
    """Count one model call against the daily cap and the client's hourly cap. (granted, reason if not)."""
    day, hour = _windows(now)
    if not _take("daily", day, settings.UNSAY_MODEL_DAILY_CAP):
        return False, "daily cap"
    scope = client_scope(client)
    if not _take(scope, hour, settings.UNSAY_MODEL_HOURLY_CAP_PER_CLIENT):
        _give_back("daily", day)  # the call is not made, so it must not use up the daily allowance
        return False, "hourly cap for this client"
    return True, ""


def usage_report(now=None) -> dict:
    """Model usage for /health: today's calls against the daily cap, this hour's per client."""
    day, hour = _windows(now)
    daily = UsageCounter.objects.filter(scope="daily", window_start=day).values_list("n", flat=True).first() or 0
    hourly = dict(UsageCounter.objects.filter(window_start=hour, scope__startswith="client:")
                  .values_list("scope", "n"))
    return {
        "reasoner": settings.UNSAY_REASONER,
        "model_id": settings.UNSAY_BEDROCK_MODEL_ID if settings.UNSAY_REASONER == "bedrock" else None,
        "daily": {"window_start": day.isoformat(), "used": daily, "cap": settings.UNSAY_MODEL_DAILY_CAP},
        "hourly_per_client": {"window_start": hour.isoformat(), "cap": settings.UNSAY_MODEL_HOURLY_CAP_PER_CLIENT,
                              "used": hourly},
        "reuse_seconds": settings.UNSAY_ASK_REUSE_SECONDS,
    }
