"""The rules reasoner and what every reasoner is handed and returns (ask.reasoners chooses one).

- AskContext in, ReasonerResult out; a verdict is one of VERDICTS.
- RulesReasoner ("rules/1"): deterministic and offline. The verdict follows from structured recall
  facts (docs/facts.md) and what drugs.matching found per dispensing row; "safe" needs a positively
  identified pack (identification_gap), else "unknown". The answer is written by ask.answers from
  what was found (docs/reasoning.md, "What an answer says"). The model reasoner (ask.bedrock) fails
  closed to it, and the guardrail (ask.guardrail) reads recalls with its rules.

Load-bearing facts (what a re-decision must be triggered by, see docs/reasoning.md):
- stop/caution on a patient's lot: the active recall facts on their lots (plus active drug-level
  recalls for the drug). Facts for other lots are shown only. A drug-level recall that lists its
  NDC products applies only if the patient's dispensing of the drug has one of them (or no NDC).
- caution from a drug-level recall: the active drug-level recall facts.
- safe with a terminated/completed recall on their lot: those closed recall facts (if one is
  reopened, its new version retracts the one we read).
- safe (or unknown: the pack not identified) because no recall touches their lots: every recall fact
  on the same drug that we read
  (other lots, closed drug-level recalls). An amended lot list or status arrives as a new version
  that retracts the one we read, so the sweep re-decides. A brand-new recall retracts nothing; the
  sweep finds those through exposure (recall lot -> dispensing), not through this read set.
"""

import functools
import logging
from dataclasses import dataclass, field

from ask import answers
from ask.answers import DO_NOT_STOP_ABRUPTLY, describe, listing, must_not_stop_abruptly  # noqa: F401 (re-exported)
from drugs import recall_terms
from drugs.identity import is_product_key
from drugs.matching import (
    RECALLED_PACK,
    UNIDENTIFIED_PACK,
    Dispensed,
    Found,
    MatchClass,
    dispensing_product,
    explain,
    lot_known,
    window_date_on_record,
    within_lot_scope,
)
from drugs.ndc import ndc_products
from drugs.recall_terms import (  # noqa: F401 (CLOSED_STATUSES and short_product re-exported)
    CLOSED_STATUSES,
    classification,
    every_lot_recalled,
    is_active,
    short_product,
)
from memory.retrieval import Retrieved

log = logging.getLogger(__name__)

RULES_IDENTITY = "rules/1"
VERDICTS = ("safe", "caution", "stop", "unknown")

@dataclass
class AskContext:
    """Everything a reasoner may look at. Built by ask.services; reasoners never query the database."""

    question: str
    subject: str
    patient_lots: list[str]
    patient_drugs: list[str]
    retrieved: list[Retrieved]
    # NDCs of this patient's dispensings of the subject ("" where unknown); narrows drug-level recalls.
    patient_ndcs: list[str] = field(default_factory=list)
    # The scopes the decision rests on (drugs.scopes); a fact sharing a lot-level one is on the patient's lot.
    premises: list[str] = field(default_factory=list)
    # ask.beliefs.DispensedRow per dispensing row of the subject (drugs.matching reads them).
    dispensed: list = field(default_factory=list)
    # (dispensing id, fingerprint) per row: recorded with the decision (memory.DecisionInput).
    inputs: list[tuple[int, str]] = field(default_factory=list)
    # What the rules below found per (rule, fact id) for this context: the reasoner and the guardrail
    # ask the same questions of the same facts.
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def has_dispensing(self) -> bool:
        return bool(self.dispensed or self.patient_lots or self.patient_ndcs)


@dataclass
class ReasonerResult:
    verdict: str
    answer: str
    reasoner: str
    load_bearing_ids: set[int] = field(default_factory=set)


# --- reading recall facts ---------------------------------------------------------------------

_MATCHES: dict[tuple, object] = {}
_MATCHES_LIMIT = 200_000


def matched(row):
    """What drugs.matching reads of a dispensing row: its drugs.matching.Dispensed values
    (ask.beliefs.DispensedRow.matched), or the row itself for any other dispensing-like object."""
    return getattr(row, "matched", row)


def match(fact, row) -> MatchClass | None:
    """drugs.matching.match, remembered (explained)."""
    found = explained(fact, row)
    return found.klass if found else None


def explained(fact, row) -> Found | None:
    """drugs.matching.explain, remembered per (fact version, what matching reads of the row).

    One decision asks it the same question up to six times (reasoner, then guardrail), and a sweep
    page asks it for thousands of rows that differ only in their id. Keyed by the fact's id *and*
    content hash (a version's content never changes; the hash guards against ids reused after a
    truncation) and by the row's Dispensed values; only those (frozen) are remembered, never a model
    instance that could change under us."""
    pk, digest = getattr(fact, "pk", None), getattr(fact, "content_hash", None)
    dispensing = matched(row)
    if pk is None or not digest or not isinstance(dispensing, Dispensed):
        return explain(fact, dispensing)
    key = (pk, digest, dispensing)
    try:
        return _MATCHES[key]
    except KeyError:
        if len(_MATCHES) >= _MATCHES_LIMIT:
            _MATCHES.clear()
        found = _MATCHES[key] = explain(fact, dispensing)
        return found


def is_recall(fact) -> bool:
    return fact.kind == "recall"






def is_drug_level(fact) -> bool:
    return (fact.attributes or {}).get("scope") == "drug" or not fact.lot


def _shares_scope(fact, ctx: AskContext, *, lot_level: bool) -> bool:
    scopes = set(getattr(fact, "scopes", None) or ())
    return any((not s.endswith("|*")) == lot_level for s in scopes.intersection(ctx.premises))


def _before_closure(fact, ctx: AskContext) -> bool:
    """A closed drug-level recall still applies to what was dispensed before FDA closed it (the pack
    may be from the recalled stock); what was dispensed after the removal was complete is not in it."""
    if not ctx.dispensed:
        return True
    return any(dispensed_before_closure(fact, row) for row in ctx.dispensed)


def dispensed_before_closure(fact, row) -> bool:
    """_before_closure for one dispensing row: True unless the recall is closed and the row was
    dispensed (known) after the day it closed."""
    closed_on = (fact.attributes or {}).get("termination_date")
    if is_active(fact) or not closed_on:
        return True
    return row.dispensed_at is None or row.dispensed_at.date().isoformat() <= closed_on


def reads_dates(fact) -> bool:
    """Whether the rules compare a dispensing's dates with this fact at all (see date_view)."""
    scope = recall_terms.lot_scope(fact)
    windowed = bool(scope) and scope.get("kind") == "all_lots_window"
    return windowed or (not is_active(fact) and bool((fact.attributes or {}).get("termination_date")))


def date_view(facts, row) -> tuple:
    """All the rules can tell of a dispensing row's dates (when dispensed, expiry) while deciding with
    `facts`: the row's answer to each date comparison they make. The rules read those dates in two
    places only, drugs.matching.within_lot_scope (an all-lots recall's expiry or distribution window) with
    drugs.matching.window_date_on_record (whether that window's date is on record at all), and
    dispensed_before_closure (a closed recall); tests/test_date_view.py walks ask/ and drugs/ to keep it so.
    Two rows equal in everything else and in this view get the same outcome from every
    reasoner (the model reasoner is shown no dates), which lets a sweep decide them once
    (corrections.sweep.groups.PageDecider)."""
    return tuple((within_lot_scope(f, matched(row)), window_date_on_record(f, matched(row)),
                  dispensed_before_closure(f, row)) for f in facts if reads_dates(f))


def _remembered(rule):
    """Remember rule(fact, ctx) in ctx.memo by fact id (a context's facts and rows do not change)."""

    @functools.wraps(rule)
    def remembered(fact, ctx):
        fact_id = getattr(fact, "pk", None)
        memo = getattr(ctx, "memo", None)
        if fact_id is None or memo is None:
            return rule(fact, ctx)
        key = (rule.__name__, fact_id)
        if key not in memo:
            memo[key] = rule(fact, ctx)
        return memo[key]

    return remembered


@_remembered
def drug_level_applies(fact, ctx: AskContext) -> bool:
    """A drug-level recall (no lot: all lots, or none named) for the subject — or for the NDC product
    dispensed — applies unless it lists its products and every dispensing of the drug to this
    patient has a known NDC of another product (same rule as patients.services exposure; unknown
    NDCs fail safe: it applies). With nothing of the drug dispensed it applies to no pack of theirs."""
    if not (is_recall(fact) and is_drug_level(fact)) or not ctx.has_dispensing:
        return False
    if fact.subject != ctx.subject and not _shares_scope(fact, ctx, lot_level=False):
        return False
    if not _before_closure(fact, ctx):
        return False
    if ctx.dispensed:
        return any(match(fact, row) in (MatchClass.PRODUCT_ALL_LOTS, MatchClass.CANDIDATE) for row in ctx.dispensed)
    products = ndc_products((fact.attributes or {}).get("ndc_products") or (fact.attributes or {}).get("ndcs"))
    if not products or not ctx.patient_ndcs:
        return True
    return any(not ndc or ndc[:10] in products for ndc in ctx.patient_ndcs)


@_remembered
def on_patient_lot(fact, ctx: AskContext) -> bool:
    """A recall of a lot this patient received: same drug and lot, or same NDC product and lot."""
    if not (is_recall(fact) and fact.lot):
        return False
    if ctx.dispensed:
        return any(match(fact, row) in (MatchClass.CONFIRMED, MatchClass.PROBABLE) for row in ctx.dispensed)
    return (fact.subject == ctx.subject and fact.lot in ctx.patient_lots) or _shares_scope(fact, ctx, lot_level=True)


@_remembered
def lot_unknown_candidates(fact, ctx: AskContext) -> bool:
    """A recall of some lots of this drug, and a dispensing of it whose lot was not recorded: the
    pack may be from a recalled lot (a candidate for the pharmacist, never "safe"). Closing the recall
    changes nothing for a pack dispensed before it closed, as for a recorded lot."""
    if not (is_recall(fact) and fact.lot):
        return False
    return any(match(fact, row) == MatchClass.CANDIDATE and not lot_known(matched(row))
               and dispensed_before_closure(fact, row) for row in ctx.dispensed)


@_remembered
def unidentified_pack_candidates(fact, ctx: AskContext) -> bool:
    """A recall of some lots naming the lot of a pack whose product we cannot identify (drugs.matching's
    UNIDENTIFIED_PACK: a name the vocabulary cannot read, an NDC the recall does not list): a candidate for
    the pharmacist, never "safe". The lot is the recalled one, so, as for a recorded recalled lot, whether
    the recall has closed since changes nothing."""
    if not (is_recall(fact) and fact.lot):
        return False
    return any((found := explained(fact, row)) is not None and found.rule == UNIDENTIFIED_PACK
               for row in ctx.dispensed)


@_remembered
def confirmed_all_lots(fact, ctx: AskContext) -> bool:
    """A recall of every lot (within its window) that names the NDC product of a pack of theirs it applies
    to (drugs.matching's product_all_lots): the pack is a recalled product, as sure as a confirmed lot."""
    if not (drug_level_applies(fact, ctx) and every_lot_recalled(fact)):
        return False
    return any(match(fact, row) == MatchClass.PRODUCT_ALL_LOTS and dispensed_before_closure(fact, row)
               for row in ctx.dispensed)


def recall_reading(ctx: AskContext) -> list[tuple]:
    """(fact, classification if the pack is recalled else "", on the patient's lot, drug-level recall
    applies, lot-unknown candidate, confirmed product of an all-lots recall) for each recall fact of the
    subject, in same_drug_recalls' order: the rules' reading the guardrail weighs, asked in one call and
    remembered in ctx.memo (the rules above are remembered per fact)."""
    memo = ctx.memo if ctx.memo is not None else {}
    if "recall_reading" not in memo:
        memo["recall_reading"] = [
            (f, classification(f) if on_lot or all_lots else "", on_lot, drug_level_applies(f, ctx),
             lot_unknown_candidates(f, ctx) or unidentified_pack_candidates(f, ctx), all_lots)
            for f in same_drug_recalls(ctx)
            for on_lot, all_lots in ((on_patient_lot(f, ctx), confirmed_all_lots(f, ctx)),)]
    return memo["recall_reading"]


def identification_gap(ctx: AskContext) -> str:
    """What keeps the pack from being positively identified ("" when it is): "not dispensed" (nothing of
    it on record), "product" (a row with neither an NDC product nor an ingredient identity: a product
    text key or no name) or "lot" (a row whose lot was not recorded). "Safe" needs "" (docs/reasoning.md)."""
    if not ctx.has_dispensing:
        return "not dispensed"
    named = bool(ctx.subject) and not is_product_key(ctx.subject)
    if ctx.dispensed:
        rows = [matched(row) for row in ctx.dispensed]
        if any(not named and not dispensing_product(row) for row in rows):
            return "product"
        return "" if all(lot_known(row) for row in rows) else "lot"
    if not named and not any(ctx.patient_ndcs):
        return "product"
    return "" if ctx.patient_lots else "lot"


def same_drug_recalls(ctx: AskContext) -> list:
    """Recall facts about the subject, or sharing a scope with the patient's dispensing of it."""
    premises = set(ctx.premises)
    return [r.fact for r in ctx.retrieved if is_recall(r.fact)
            and (r.fact.subject == ctx.subject or premises.intersection(getattr(r.fact, "scopes", None) or ()))]


def about_the_medicine(fact, ctx: AskContext) -> bool:
    """A recall of the patient's own medicine (its identity, or an NDC product of theirs), not one that
    only shares a lot number's scope with their dispensing: the only recalls an answer names."""
    if fact.subject == ctx.subject:
        return True
    products = recall_terms.products(fact)
    return any(dispensing_product(matched(row)) in products for row in ctx.dispensed)


def _hits(facts, ctx: AskContext, classes) -> list[tuple]:
    """(fact, row, Found) for each row these facts reach with one of these match classes."""
    return [(f, row, found) for f in facts for row in ctx.dispensed
            if (found := explained(f, row)) is not None and found.klass in classes]


# --- rules ------------------------------------------------------------------------------------

class RulesReasoner:
    """Deterministic verdicts from structured recall facts (docs/reasoning.md, "Rules").

    A recall of a lot the patient received decides the verdict by its class whether or not FDA has
    since closed it: termination means the removal is complete, not that the dispensed pack became
    safe, so closing a recall never moves a verdict (and so never drafts a letter). A confirmed pack of a
    recall of every lot is decided the same way. "Safe" needs a positively identified pack (an NDC
    product or an ingredient identity, and a recorded lot); otherwise, with nothing found, "unknown".
    The answer is written by ask.answers from what was found."""

    uses_model = False

    def __init__(self, note: str = ""):
        self.identity = RULES_IDENTITY + (f" ({note})" if note else "")

    def decide(self, ctx: AskContext) -> ReasonerResult:
        recalls = same_drug_recalls(ctx)
        in_premises = {f.id for f in recalls if set(getattr(f, "scopes", None) or ()).intersection(ctx.premises)}
        named_by = [f for f in recalls for row in ctx.dispensed if match(f, row) in RECALLED_PACK
                    and dispensing_product(matched(row))]
        name = answers.subject_name(ctx.subject, named_by)
        medicine = " ".join(dict.fromkeys([ctx.subject, *(f.subject for f in named_by)]))
        if not ctx.has_dispensing:
            active = [f for f in recalls if is_active(f) and about_the_medicine(f, ctx)]
            return ReasonerResult("unknown", answers.not_dispensed_answer(ctx, name=name, active=active),
                                  self.identity, in_premises)

        lot_hits = [f for f in recalls if on_patient_lot(f, ctx)]
        drug_hits = [f for f in recalls if drug_level_applies(f, ctx)]
        all_lots = [f for f in drug_hits if confirmed_all_lots(f, ctx)]
        packs = lot_hits + all_lots
        if packs:
            bearing = {f.id for f in lot_hits + drug_hits}
            hits = _hits(lot_hits, ctx, (MatchClass.CONFIRMED, MatchClass.PROBABLE)) + \
                _hits(all_lots, ctx, (MatchClass.PRODUCT_ALL_LOTS,))
            hits.sort(key=lambda hit: hit[2].klass == MatchClass.PROBABLE)  # the sure ones first
            classes = {classification(f) for f in packs}
            if not hits:  # a context without dispensing rows (lots and NDCs only): the facts as they stand
                answer = (" ".join(describe(f) + "." for f in packs) + " Contact your pharmacy now, today, before your "
                          "next dose.")
            else:
                answer = answers.pack_answer(ctx, hits, name=name, medicine=medicine, classes=classes,
                                             active=any(is_active(f) for f in packs))
            return ReasonerResult("stop" if "Class I" in classes else "caution", answer, self.identity, bearing)

        unknown_lot = [f for f in recalls if lot_unknown_candidates(f, ctx)]
        unidentified = [f for f in recalls if unidentified_pack_candidates(f, ctx)]
        if unknown_lot or drug_hits or unidentified:
            drug_level = list(dict.fromkeys(
                (f, row) for f in drug_hits for row in (ctx.dispensed or [None])
                if row is None or match(f, row) in (MatchClass.PRODUCT_ALL_LOTS, MatchClass.CANDIDATE)))
            serious = any(classification(f) == "Class I" for f in unknown_lot + drug_hits + unidentified)
            answer = answers.candidate_answer(ctx, name=name, medicine=medicine, lot_unknown=unknown_lot,
                                              drug_level=drug_level, serious=serious, unidentified=unidentified)
            return ReasonerResult("caution", answer, self.identity,
                                  {f.id for f in unknown_lot + drug_hits + unidentified})

        gap = identification_gap(ctx)
        own = [f for f in recalls if about_the_medicine(f, ctx)]
        if gap:
            return ReasonerResult("unknown", answers.unknown_answer(ctx, name=name, gap=gap, own_recalls=own),
                                  self.identity, in_premises)
        reasons: dict[str, list] = {}
        for fact in own:
            rows = list(ctx.dispensed)
            kind = answers.why_not(fact, [matched(r) for r in rows],
                                   within=[within_lot_scope(fact, matched(r)) for r in rows],
                                   before_closure=[dispensed_before_closure(fact, r) for r in rows])
            reasons.setdefault(kind, []).append(fact)
        return ReasonerResult("safe", answers.safe_answer(ctx, name=name, reasons=reasons), self.identity,
                              in_premises)
