"""The rules reasoner and what every reasoner is handed and returns (ask.reasoners chooses one).

- AskContext in, ReasonerResult out; a verdict is one of VERDICTS.
- RulesReasoner ("rules/1"): deterministic and offline. The verdict follows from structured recall
  facts (docs/facts.md); the answer is written from the facts it relied on. The model reasoner
  (ask.bedrock) fails closed to it, and the guardrail (ask.guardrail) reads recalls with its rules.

Load-bearing facts (what a re-decision must be triggered by, see docs/reasoning.md):
- stop/caution on a patient's lot: the active recall facts on their lots (plus active drug-level
  recalls for the drug). Facts for other lots are shown only. A drug-level recall that lists its
  NDC products applies only if the patient's dispensing of the drug has one of them (or no NDC).
- caution from a drug-level recall: the active drug-level recall facts.
- safe with a terminated/completed recall on their lot: those closed recall facts (if one is
  reopened, its new version retracts the one we read).
- safe because no recall touches their lots: every recall fact on the same drug that we read
  (other lots, closed drug-level recalls). An amended lot list or status arrives as a new version
  that retracts the one we read, so the sweep re-decides. A brand-new recall retracts nothing; the
  sweep finds those through exposure (recall lot -> dispensing), not through this read set.
"""

import functools
import logging
from dataclasses import dataclass, field

from drugs import recall_terms
from drugs.identity import readable
from drugs.matching import Dispensed, MatchClass, explain, within_lot_scope
from drugs.matching import match as _match_uncached
from drugs.ndc import ndc_products
from drugs.recall_terms import CLOSED_STATUSES, classification, is_active, short_product  # noqa: F401 (re-exported)
from memory.retrieval import Retrieved
from recalls.selectors import with_texts

log = logging.getLogger(__name__)

RULES_IDENTITY = "rules/1"


def describe(fact) -> str:
    """drugs.recall_terms.describe of the fact as believed, its reason and product read through
    recalls.selectors (inline, or once per record version by reference; cached by digest)."""
    return recall_terms.describe(with_texts([fact])[0])
VERDICTS = ("safe", "caution", "stop", "unknown")

# Medicines that must not be stopped abruptly (rebound hypertension, clotting, seizures, withdrawal,
# adrenal crisis, ...). For these the answer always says not to stop on one's own. Matched per word
# of the normalised drug name, so "amlodipine valsartan" matches.
DO_NOT_STOP_ABRUPTLY = {
    # blood pressure / heart
    "valsartan", "losartan", "irbesartan", "candesartan", "olmesartan", "telmisartan", "azilsartan",
    "lisinopril", "enalapril", "ramipril", "benazepril", "quinapril", "perindopril", "captopril",
    "amlodipine", "nifedipine", "diltiazem", "verapamil", "felodipine",
    "metoprolol", "atenolol", "propranolol", "carvedilol", "bisoprolol", "nebivolol", "labetalol",
    "clonidine", "hydrochlorothiazide", "chlorthalidone", "furosemide", "spironolactone", "digoxin",
    "amiodarone", "isosorbide", "nitroglycerin",
    # anticoagulants / antiplatelets
    "warfarin", "apixaban", "rivaroxaban", "dabigatran", "edoxaban", "enoxaparin", "heparin",
    "clopidogrel", "ticagrelor", "prasugrel",
    # antiepileptics
    "levetiracetam", "lamotrigine", "phenytoin", "carbamazepine", "oxcarbazepine", "valproate",
    "valproic", "divalproex", "topiramate", "lacosamide", "zonisamide", "phenobarbital", "gabapentin",
    "pregabalin", "clonazepam", "clobazam",
    # others where abrupt stopping is dangerous
    "levothyroxine", "prednisone", "prednisolone", "hydrocortisone", "dexamethasone", "insulin",
    "sertraline", "paroxetine", "venlafaxine", "duloxetine", "fluoxetine", "citalopram", "escitalopram",
    "alprazolam", "lorazepam", "diazepam", "baclofen", "aripiprazole", "quetiapine", "olanzapine",
    "risperidone", "lithium", "methadone", "buprenorphine", "oxycodone", "morphine", "tramadol",
}


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


def match(fact, row):
    """drugs.matching.match, remembered per (fact version, what matching reads of the row).

    One decision asks it the same question up to six times (reasoner, then guardrail), and a sweep
    page asks it for thousands of rows that differ only in their id. Keyed by the fact's id *and*
    content hash (a version's content never changes; the hash guards against ids reused after a
    truncation) and by the row's Dispensed values; only those (frozen) are remembered, never a model
    instance that could change under us."""
    pk, digest = getattr(fact, "pk", None), getattr(fact, "content_hash", None)
    dispensing = matched(row)
    if pk is None or not digest or not isinstance(dispensing, Dispensed):
        return _match_uncached(fact, dispensing)
    key = (pk, digest, dispensing)
    try:
        return _MATCHES[key]
    except KeyError:
        if len(_MATCHES) >= _MATCHES_LIMIT:
            _MATCHES.clear()
        found = _MATCHES[key] = _match_uncached(fact, dispensing)
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
    places only, drugs.matching.within_lot_scope (an all-lots recall's expiry or distribution window)
    and dispensed_before_closure (a closed recall); tests/test_date_view.py walks ask/ and drugs/ to
    keep it so. Two rows equal in everything else and in this view get the same outcome from every
    reasoner (the model reasoner is shown no dates), which lets a sweep decide them once
    (corrections.sweep_pages.PageDecider)."""
    return tuple((within_lot_scope(f, matched(row)), dispensed_before_closure(f, row)) for f in facts if reads_dates(f))


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
    pack may be from a recalled lot (a candidate for the pharmacist, never "safe")."""
    if not (is_recall(fact) and fact.lot and is_active(fact)):
        return False
    return any(match(fact, row) == MatchClass.CANDIDATE for row in ctx.dispensed)


def recall_reading(ctx: AskContext) -> list[tuple]:
    """(fact, classification if on the patient's lot else "", on the patient's lot, drug-level recall
    applies, lot-unknown candidate) for each recall fact of the subject, in same_drug_recalls' order: the
    rules' reading the guardrail weighs, asked in one call and remembered in ctx.memo (the rules above
    are remembered per fact)."""
    memo = ctx.memo if ctx.memo is not None else {}
    if "recall_reading" not in memo:
        memo["recall_reading"] = [
            (f, classification(f) if on_lot else "", on_lot, drug_level_applies(f, ctx), lot_unknown_candidates(f, ctx))
            for f in same_drug_recalls(ctx) for on_lot in (on_patient_lot(f, ctx),)]
    return memo["recall_reading"]


COVERS_EVERY_LOT = "(the recall covers every lot)"  # recalls.ingest.recall_statement's two drug-level phrasings
NAMES_NO_LOT = "(the recall names no lot number"


def covers_every_lot(fact) -> bool:
    """The recall text says every lot is recalled (not merely that it names none)."""
    statement = fact.statement or ""
    if COVERS_EVERY_LOT in statement:
        return True
    if NAMES_NO_LOT in statement:
        return False
    # A statement in neither phrasing (written before they existed): the stored scope decides.
    return every_lot_treated_as_affected(fact)


def every_lot_treated_as_affected(fact) -> bool:
    """Ingestion treats every lot of a recall that names none as affected (over-notify): the stored
    scope says "all_lots" although the text never said so."""
    return ((fact.attributes or {}).get("lot_scope") or {}).get("kind", "").startswith("all_lots")


def same_drug_recalls(ctx: AskContext) -> list:
    """Recall facts about the subject, or sharing a scope with the patient's dispensing of it."""
    premises = set(ctx.premises)
    return [r.fact for r in ctx.retrieved if is_recall(r.fact)
            and (r.fact.subject == ctx.subject or premises.intersection(getattr(r.fact, "scopes", None) or ()))]


def must_not_stop_abruptly(drug: str) -> bool:
    return any(word in DO_NOT_STOP_ABRUPTLY for word in (drug or "").split())






def why_probable(facts, ctx: AskContext) -> str:
    """Why a lot match is probable, not sure, in the patient's words (drugs.matching.explain's rule)."""
    rules = [(f, row, found.rule) for f in facts for row in ctx.dispensed
             if (found := explain(f, matched(row))) is not None and found.klass == MatchClass.PROBABLE]
    for fact, row, rule in rules:
        if "near miss" in rule:
            return f"the lot number on record ({row.lot}) is very close to recalled lot {fact.lot}"
    if any("another labeler" in rule for *_, rule in rules):
        return "the lot matches a recalled one, in another company's package of the same medicine"
    return "the lot matches a recalled one, but our records do not confirm the exact product"


def listing(numbers: list[str], most: int = 5) -> str:
    """'A, B, C' or, for long lists, 'A, B, C, D, E and 37 more'."""
    if len(numbers) <= most:
        return ", ".join(numbers)
    return f"{', '.join(numbers[:most])} and {len(numbers) - most} more"


def keep_taking_advice(drug: str) -> str:
    if must_not_stop_abruptly(drug):
        return (f"Do not stop {drug} on your own: stopping it suddenly can be dangerous. Your pharmacist or doctor "
                "will arrange a replacement from an unaffected lot.")
    return "Ask your pharmacist before changing how you take it; they can arrange a replacement from an unaffected lot."


# --- rules ------------------------------------------------------------------------------------

class RulesReasoner:
    """Deterministic verdicts from structured recall facts (docs/reasoning.md, "Rules").

    A recall of a lot the patient received decides the verdict by its class whether or not FDA has
    since closed it: termination means the removal is complete, not that the dispensed pack became
    safe, so closing a recall never moves a verdict (and so never drafts a letter)."""

    uses_model = False

    def __init__(self, note: str = ""):
        self.identity = RULES_IDENTITY + (f" ({note})" if note else "")

    def decide(self, ctx: AskContext) -> ReasonerResult:
        recalls = same_drug_recalls(ctx)
        # A product key reads as the product ("HCG 10000U 1ML INJ"); an answer never carries a blank.
        drug = readable(ctx.subject) or "medicine"
        in_premises = {f.id for f in recalls if set(getattr(f, "scopes", None) or ()).intersection(ctx.premises)}
        if not ctx.has_dispensing:
            active = sorted({(f.attributes or {}).get("recall_number", f.fact_key) for f in recalls if is_active(f)})
            answer = (f"We have no record of {drug} dispensed to you, so we cannot check your pack. "
                      + (f"Some {drug} lots are under active recall ({listing(active, most=3)}). " if active else "")
                      + "Tell us the lot number printed on your pack, or ask your pharmacist to check it.")
            return ReasonerResult("unknown", answer, self.identity, in_premises)

        lot_hits = [f for f in recalls if on_patient_lot(f, ctx)]
        drug_hits = [f for f in recalls if drug_level_applies(f, ctx)]
        if lot_hits:
            classes = {classification(f) for f in lot_hits}
            bearing = {f.id for f in lot_hits + drug_hits}
            facts_text = " ".join(describe(f) + "." for f in lot_hits)
            # Sure only when a pack matches by its own NDC product and lot; a near-miss lot, a repackager's
            # NDC or a name is probable: the same verdict (never "safe"), said as what it is.
            sure = not ctx.dispensed or any(match(f, row) == MatchClass.CONFIRMED
                                            for f in lot_hits for row in ctx.dispensed)
            closed = "" if any(is_active(f) for f in lot_hits) else (
                " FDA has closed this recall because the recalled stock has been removed, but the pack "
                f"dispensed to you {'came' if sure else 'may have come'} from a recalled lot. If you still have "
                "any of it, do not use it up.")
            opening = (f"The {drug} dispensed to you is from a recalled lot." if sure else
                       f"The {drug} dispensed to you may be from a recalled lot: {why_probable(lot_hits, ctx)}. "
                       f"Your pharmacist will check the pack.")
            if "Class I" in classes:
                answer = (f"{opening} {facts_text}{closed} Contact your "
                          f"pharmacy now, today, before your next dose. {keep_taking_advice(drug)}")
                return ReasonerResult("stop", answer, self.identity, bearing)
            if classes - {"Class III"}:  # Class II, or not yet classified: treat as Class II
                answer = (f"{opening} {facts_text}{closed} This kind of "
                          f"recall means a temporary or reversible health risk is possible. Contact your pharmacy "
                          f"to arrange a replacement. {keep_taking_advice(drug)}")
                return ReasonerResult("caution", answer, self.identity, bearing)
            answer = (f"For your information: {facts_text}{closed} A Class III recall is unlikely to cause health "
                      f"problems. Mention it to your pharmacist at your next visit. {keep_taking_advice(drug)}")
            return ReasonerResult("caution", answer, self.identity, bearing)

        unknown_lot = [f for f in recalls if lot_unknown_candidates(f, ctx)]
        if unknown_lot:
            numbers = sorted({(f.attributes or {}).get("recall_number", f.fact_key) for f in unknown_lot})
            answer = (f"Some {drug} lots are under recall ({listing(numbers, most=3)}), and the lot number of the "
                      f"{drug} dispensed to you was not recorded. Check the lot number printed on your pack with "
                      f"your pharmacist. {keep_taking_advice(drug)}")
            return ReasonerResult("caution", answer, self.identity, {f.id for f in unknown_lot + drug_hits})

        if drug_hits:
            facts_text = " ".join(describe(f) + "." for f in drug_hits)
            if any(covers_every_lot(f) for f in drug_hits):
                scope_text = f"This recall covers every lot of this {drug} product, including yours."
            elif any(every_lot_treated_as_affected(f) for f in drug_hits):
                scope_text = (f"This recall names no lot numbers, so every lot of this {drug} product is treated "
                              f"as affected, including yours.")
            else:
                scope_text = (f"This recall does not list lot numbers, so we cannot tell from your lot"
                              f"{'s' if len(ctx.patient_lots) != 1 else ''} "
                              f"({', '.join(ctx.patient_lots) or 'none on file'}) whether your {drug} is affected.")
            answer = (f"{facts_text} {scope_text} Ask your pharmacist to check your pack. "
                      f"{keep_taking_advice(drug)}")
            return ReasonerResult("caution", answer, self.identity, {f.id for f in drug_hits})

        lots_text = ", ".join(ctx.patient_lots) or "lot not recorded"
        answer = f"No recall in our records covers the {drug} dispensed to you ({lots_text})."
        other_lots = [f for f in recalls if f.lot and not on_patient_lot(f, ctx)]
        if other_lots:
            numbers = sorted({(f.attributes or {}).get("recall_number", f.fact_key) for f in other_lots})
            answer += (f" There are recalls of other {drug} lots ({listing(numbers, most=3)}), which were not "
                       "dispensed to you.")
        other_products = [f for f in recalls if is_drug_level(f) and not drug_level_applies(f, ctx)]
        if other_products:
            numbers = sorted({(f.attributes or {}).get("recall_number", f.fact_key) for f in other_products})
            answer += (f" Recalls of {drug} from other makers ({listing(numbers, most=3)}) list products (NDCs) "
                       "other than the one dispensed to you.")
        return ReasonerResult("safe", answer, self.identity, in_premises)

