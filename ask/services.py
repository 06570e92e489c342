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
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from ask import rate_limits
from ask.beliefs import DbBeliefs, DispensedRow
from ask.guardrail import apply_guardrail
from ask.reasoners import get_reasoner
from ask.rules import AskContext, RulesReasoner
from core.retry import run_in_transaction
from drugs.identity import find_ingredients, is_identity_key, is_product_key, readable
from drugs.identity import resolve as resolve_identity
from drugs.scopes import ANY_LOT, DRUG_LEVEL, dispensing_scopes
from memory.decisions import ReadSpec, inputs_fingerprint, record_decision
from memory.models import Decision, Fact
from memory.retrieval import Retrieved

log = logging.getLogger(__name__)

RETRIEVE_K = 12


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
    premises: list[str] = field(default_factory=list)
    inputs: list[tuple[int, str]] = field(default_factory=list)

    def read_specs(self) -> list[ReadSpec]:
        return [ReadSpec(fact=r.fact, rank=rank, score=r.score, load_bearing=r.fact.id in self.load_bearing_ids)
                for rank, r in enumerate(self.retrieved, start=1)]


# --- subject and context ----------------------------------------------------------------------

def _words(text: str) -> str:
    return " " + " ".join(re.sub(r"[^a-z]+", " ", (text or "").lower()).split()) + " "


def patient_drugs(patient, beliefs=None) -> list[str]:
    return (beliefs or DbBeliefs()).patient_drugs(patient)


def resolve_subject(patient, question: str, subject: str | None = None, *, beliefs=None) -> tuple[str | None, str]:
    """(subject, "") or (None, question to ask back). Subjects are drug identity keys (drugs.identity).

    An explicit subject wins: an identity key as it is (a stored key is never re-resolved: the
    vocabulary reads some keys as others, "cefazolin+sodium chloride" as "cefazolin"), a text by its
    identity; a key none of their drugs has is the one drug of theirs whose package a believed fact about
    that key names (a pack typed "LOSART POT 50MG TAB" with a recalled losartan NDC), so the answer is
    about the rows they hold. Else the medicine the question names (a patient's drug with exactly
    those ingredients, or the one combination of theirs that contains them, or — named but not
    dispensed to them — that drug itself, answered "unknown" with a request for the lot); else
    their only drug, if the text reads as a question about medicine; else a question back."""
    drugs = patient_drugs(patient, beliefs)
    if subject:
        text = subject.strip()
        key = text if text in drugs or is_identity_key(text) or is_product_key(text) else \
            resolve_identity(text).key or text.lower()
        if key not in drugs:
            own = _held_through_packages(patient, key.split("+"), drugs, beliefs, by_ingredients=False)
            if len(own) == 1:
                return own[0], ""
        return key, ""
    named = find_ingredients(question or "")
    if named:
        key = "+".join(named)
        if key in drugs:
            return key, ""
        containing = [d for d in drugs if set(named) <= set(d.split("+"))]
        if len(containing) == 1:
            return containing[0], ""
        if not containing:
            own = _held_through_packages(patient, named, drugs, beliefs)
            if len(own) == 1:
                return own[0], ""
            # The question names a drug we have no dispensing of: answer about *that* drug (the
            # reasoner asks for the lot), never silently about the one drug we do have on file.
            return key, ""
        return None, f"Which medicine are you asking about: {', '.join(_readable(d) for d in containing)}?"
    text = _words(question)
    # A product the vocabulary does not know is named by its own words ("Is my HCG safe?").
    by_text = [d for d in drugs if is_product_key(d) and f" {d[len('product:'):].split()[0]} " in text]
    if len(by_text) == 1:
        return by_text[0], ""
    if len(drugs) == 1 and _reads_as_a_question(text):
        return drugs[0], ""
    if not drugs:
        return None, "We have no medicines on file for you. Which medicine are you asking about?"
    return None, f"Which medicine are you asking about: {', '.join(_readable(d) for d in drugs)}?"


def _held_through_packages(patient, named: list[str], drugs: list[str], beliefs=None, *,
                           by_ingredients: bool = True) -> list[str]:
    """The patient's drugs a name reaches through their own packages, when no drug of theirs has those
    ingredients: a brand resolves to another name than the row's ("NP Thyroid" -> thyroid, the row
    levothyroxine+liothyronine), so the row counts when its ingredients overlap the named ones
    (by_ingredients) or its NDC product is listed by a believed fact whose subject is the named drug."""
    key = "+".join(named)
    held = []
    for drug in drugs:
        if by_ingredients and set(named) & set(drug.split("+")):
            held.append(drug)
            continue
        products = {row.ndc_product for row in (beliefs or DbBeliefs()).dispensed_rows(patient, drug)} - {""}
        scopes = [f"ndc:{p}|{mark}" for p in sorted(products) for mark in (DRUG_LEVEL, ANY_LOT)]
        if scopes and Fact.objects.believed().filter(subject=key, scopes__overlap=scopes).exists():
            held.append(drug)
    return held


def _readable(key: str) -> str:
    return readable(key) or "a medicine with no recorded name"


# Words of a question about one's medicine; a text with none of them and no drug name (e.g. "asdf")
# is not answered about whatever drug happens to be on file.
_QUESTION_WORDS = frozenset(
    "safe safety ok okay fine recall recalls recalled medicine medicines medication medications pill pills tablet "
    "tablets capsule capsules drug drugs take taking took affected pack packet bottle lot prescription dose doses "
    "worry worried problem problems risk dangerous still keep use using refill".split())


def _reads_as_a_question(text: str) -> bool:
    return any(word in _QUESTION_WORDS for word in text.split())


def dispensed_rows(patient, subject: str) -> list[DispensedRow]:
    return DbBeliefs().dispensed_rows(patient, subject)


def premises_for(subject: str, rows: list[DispensedRow]) -> list[str]:
    """The scopes a decision about `subject` rests on: each dispensed lot and the drug level, by
    drug identity and by NDC product (drugs.scopes). With nothing dispensed, the drug level alone."""
    scopes = {scope for row in rows
              for scope in dispensing_scopes(subject, "" if row.lot_unknown else row.lot, row.ndc_product,
                                             row.lot_alternatives)}
    scopes.add(f"drug:{subject}|{DRUG_LEVEL}")
    return sorted(scopes)


def build_context(patient, question: str, subject: str, *, beliefs=None) -> AskContext:
    """Everything the reasoner sees, read through `beliefs` (ask.beliefs: the database by
    default; a sweep page hands in what it read for all its decisions at once).

    The read set is every believed fact in the decision's premises (so a fact asserted later in one
    of them is exactly "a fact this decision did not take into account"), then retrieved context."""
    beliefs = beliefs or DbBeliefs()
    rows = beliefs.dispensed_rows(patient, subject)
    premises = premises_for(subject, rows)
    in_scope = beliefs.facts_in_scopes(premises)
    lots = sorted({row.lot for row in rows} - {""})
    retrieved = [Retrieved(f, 1.0, "lot" if f.lot else "drug") for f in in_scope]
    seen = {f.id for f in in_scope}
    # Context only (never load-bearing unless a reasoner cites it): other lots and recalls of the
    # drug, then neighbours of the question by meaning (memory.retrieval.fill: vector and full text).
    retrieved += [r for r in beliefs.retrieve(question, subject=subject, lots=lots, k=RETRIEVE_K)
                  if r.fact.id not in seen]
    return AskContext(question=question, subject=subject, patient_lots=lots,
                      patient_drugs=beliefs.patient_drugs(patient),
                      retrieved=retrieved, patient_ndcs=sorted({row.ndc for row in rows}),
                      premises=premises, dispensed=list(rows),
                      inputs=[(row.id, row.fingerprint) for row in rows])


def _fingerprint(ctx: AskContext) -> str:
    return inputs_fingerprint(ctx.question, [f"{i}:{fp}" for i, fp in ctx.inputs] or ctx.patient_lots,
                              [f"{r.fact.fact_key}@{r.fact.version}" for r in ctx.retrieved])


def _unknown_outcome(question_back: str) -> Outcome:
    return Outcome(verdict=Decision.Verdict.UNKNOWN, answer=question_back, reasoner=RulesReasoner().identity,
                   subject="", retrieved=[], load_bearing_ids=set())


def finish(ctx: AskContext, result) -> Outcome:
    """The guardrail over a reasoner's result, as the Outcome decide() returns (the sweep's grouped
    decisions call it for a context whose patient lots are marked, corrections.sweep.groups)."""
    guarded = apply_guardrail(ctx, result)
    return Outcome(verdict=guarded.verdict, answer=guarded.answer, reasoner=result.reasoner[:100], subject=ctx.subject,
                   retrieved=ctx.retrieved, load_bearing_ids=guarded.load_bearing_ids,
                   reasoner_verdict=guarded.reasoner_verdict, guardrail_override=guarded.guardrail_override,
                   inputs_hash=_fingerprint(ctx), patient_lots=ctx.patient_lots, premises=ctx.premises,
                   inputs=ctx.inputs)


# --- contract ---------------------------------------------------------------------------------

def decide(patient, question, *, subject=None, reasoner=None, client=None, beliefs=None) -> Outcome:
    """Resolve the subject, retrieve, run the reasoner, apply the guardrail. Writes no decision.

    What it reads comes from `beliefs` (ask.beliefs.DbBeliefs by default; the sweep's set-based
    page hands in a PageBeliefs): the same logic either way.

    A model reasoner's call is counted against the caps first (the sweep's re-decisions count under
    `client`, default the internal scope); past a cap the rules reasoner answers, marked as such."""
    resolved, question_back = resolve_subject(patient, question, subject, beliefs=beliefs)
    if resolved is None:
        return _unknown_outcome(question_back)
    ctx = build_context(patient, question, resolved, beliefs=beliefs)
    chosen = get_reasoner(reasoner)
    if chosen.uses_model:
        granted, why = reserve_model_call(client)
        if not granted:
            chosen = RulesReasoner(note=f"model cap reached: {why}")
    return finish(ctx, chosen.decide(ctx))


def record_outcome(outcome: Outcome, *, patient, question, replaces=None) -> Decision:
    """Write the decision and its read set; joins the caller's transaction."""
    return record_decision(
        question=question, verdict=outcome.verdict, answer=outcome.answer, reasoner=outcome.reasoner,
        reads=outcome.read_specs(), patient=patient, subject=outcome.subject,
        reasoner_verdict=outcome.reasoner_verdict, guardrail_override=outcome.guardrail_override,
        inputs_hash=outcome.inputs_hash, replaces=replaces, premises=outcome.premises, inputs=outcome.inputs,
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
            # The same question on the same inputs within the reuse window is the same decision:
            # a client asking 300 times holds one answer, and a recall change drafts one letter.
            reused = reusable_decision(patient, outcome.inputs_hash) if outcome.inputs_hash else None
            if reused is not None:
                return reused
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
        outcome = finish(ctx, reasoner.decide(ctx))
    return run_in_transaction(_record_fresh, outcome, patient=patient, question=question, subject=subject)


def subjects_asked(patient, question: str, subject: str | None = None, *, beliefs=None) -> list[str | None]:
    """The drugs a question asks about, each answered on its own. One entry (None: resolve_subject
    decides) unless the question names several ingredients that are not one medicine the patient holds:
    "my losartan and my atorvastatin" is two questions, not a combination product."""
    if subject:
        return [subject]
    named = find_ingredients(question or "")
    if len(named) < 2:
        return [None]
    drugs = patient_drugs(patient, beliefs)
    if "+".join(named) in drugs or len([d for d in drugs if set(named) <= set(d.split("+"))]) == 1:
        return [None]
    subjects = []
    for name in named:
        containing = [d for d in drugs if name in d.split("+")]
        chosen = name if name in drugs or len(containing) != 1 else containing[0]
        if chosen not in subjects:
            subjects.append(chosen)
    return subjects


def ask_each(patient, question, *, subject=None, client=None) -> list[Decision]:
    """One decision per drug the question asks about (subjects_asked), in the order named."""
    return [ask(patient, question, subject=one, client=client)
            for one in subjects_asked(patient, (question or "").strip(), subject)]


def reusable_decision(patient, inputs_hash: str) -> Decision | None:
    """A standing decision for the same patient and identical inputs within UNSAY_ASK_REUSE_SECONDS."""
    if settings.UNSAY_ASK_REUSE_SECONDS <= 0:
        return None
    since = timezone.now() - timedelta(seconds=settings.UNSAY_ASK_REUSE_SECONDS)
    reused = (Decision.objects.standing().filter(patient_id=patient.pk, inputs_hash=inputs_hash, decided_at__gte=since)
              .order_by("-decided_at").first())
    if reused is not None:
        reused.patient = patient  # as record_decision leaves it on a new one
    return reused


# --- cost controls ----------------------------------------------------------------------------

def client_scope(client) -> str:
    return f"client:{client.pk}" if client is not None else "client:internal"


def reserve_model_call(client=None, *, now=None) -> tuple[bool, str]:
    """Count one model call against the daily cap and the client's hourly cap. (granted, reason if not)."""
    now = now or timezone.now()
    if not rate_limits.take("daily", "day", settings.UNSAY_MODEL_DAILY_CAP, now=now):
        return False, "daily cap"
    if not rate_limits.take(client_scope(client), "hour", settings.UNSAY_MODEL_HOURLY_CAP_PER_CLIENT, now=now):
        rate_limits.give_back("daily", "day", now=now)  # the call is not made: it must not use up the day's calls
        return False, "hourly cap for this client"
    return True, ""


def usage_report(now=None) -> dict:
    """Model usage for /health: today's calls against the daily cap, this hour's per client."""
    now = now or timezone.now()
    day, hour = rate_limits.window_start("day", now), rate_limits.window_start("hour", now)
    daily = rate_limits.counts("daily", "day", now=now).get("daily", 0)
    hourly = rate_limits.counts("client:", "hour", now=now)
    return {
        "reasoner": settings.UNSAY_REASONER,
        "model_id": settings.UNSAY_BEDROCK_MODEL_ID if settings.UNSAY_REASONER == "bedrock" else None,
        "daily": {"window_start": day.isoformat(), "used": daily, "cap": settings.UNSAY_MODEL_DAILY_CAP},
        "hourly_per_client": {"window_start": hour.isoformat(), "cap": settings.UNSAY_MODEL_HOURLY_CAP_PER_CLIENT,
                              "used": hourly},
        "reuse_seconds": settings.UNSAY_ASK_REUSE_SECONDS,
    }


def rebind_inputs(outcome: Outcome, question: str, inputs) -> Outcome:
    """The same outcome for another patient whose dispensing of the drug has the same contents
    (the sweep shares one decision between them): only the rows it rests on are theirs."""
    inputs = sorted(inputs)
    fingerprint = inputs_fingerprint(question, [f"{i}:{fp}" for i, fp in inputs] or outcome.patient_lots,
                                     [f"{r.fact.fact_key}@{r.fact.version}" for r in outcome.retrieved])
    return replace(outcome, inputs=inputs, inputs_hash=fingerprint)
