"""The guardrail around every reasoner.

Whatever a reasoner says, the verdict may not be weaker than the structured facts in the retrieved
set demand: a Class I recall on a lot this patient received, or of every lot of a product their pack
is confirmed to be, requires "stop"; any other recall on their lot, or a drug-level recall that
applies to their drug, requires at least "caution" — closed (terminated) recalls included, since
closing a recall does not make a dispensed recalled pack safe; a recall of some lots of their drug
with their lot unrecorded also requires "caution". With none of those, a pack that is not positively
identified (ask.rules.identification_gap: no NDC product and no ingredient identity, a lot not
recorded, nothing of it on record) requires at least "unknown": "safe" is never said of a pack we
cannot identify. A weaker verdict is raised, the reasoner's own verdict and the reason are kept for
the decision record, and the facts that forced it become load-bearing.
"""

from dataclasses import dataclass, field

from ask.rules import AskContext, ReasonerResult, RulesReasoner, describe, identification_gap, recall_reading

SEVERITY = {"safe": 0, "unknown": 1, "caution": 2, "stop": 3}


@dataclass
class Floor:
    verdict: str
    facts: list = field(default_factory=list)
    why: str = ""  # what demands it when no fact does


def floor_for(ctx: AskContext) -> Floor | None:
    """The weakest verdict the facts allow, with the facts that demand it; None if anything goes."""
    # Closed recalls count: a pack from a recalled lot is not made safe by FDA closing the recall.
    # (fact, class if the pack is recalled, on their lot, drug-level applies, lot-unknown candidate,
    # confirmed product of an all-lots recall)
    reading = recall_reading(ctx)
    class_one = [f for f, klass, on_lot, _drug, _unknown, all_lots in reading
                 if (on_lot or all_lots) and klass == "Class I"]
    if class_one:
        return Floor("stop", class_one)
    caution = [f for f, klass, on_lot, drug_level, unknown, _all_lots in reading
               if (on_lot and klass != "Class I") or drug_level or unknown]
    if caution:
        return Floor("caution", caution)
    gap = identification_gap(ctx)
    if gap:
        return Floor("unknown", why=f"the pack is not positively identified ({gap})")
    return None


@dataclass
class Guarded:
    verdict: str
    answer: str
    load_bearing_ids: set[int]
    reasoner_verdict: str = ""
    guardrail_override: str = ""


def apply_guardrail(ctx: AskContext, result: ReasonerResult) -> Guarded:
    floor = floor_for(ctx)
    if floor is None or SEVERITY.get(result.verdict, 0) >= SEVERITY[floor.verdict]:
        bearing = set(result.load_bearing_ids) | ({f.id for f in floor.facts} if floor else set())
        return Guarded(result.verdict, result.answer, bearing)
    # The reasoner's answer argues for a weaker verdict, so it is replaced by the rules' answer,
    # which is written from exactly the facts that force the floor.
    rules = RulesReasoner().decide(ctx)
    answer = rules.answer if SEVERITY[rules.verdict] >= SEVERITY[floor.verdict] else (
        " ".join(describe(f) + "." for f in floor.facts) + " Contact your pharmacy.")
    why = (f"reasoner said {result.verdict!r} but the retrieved facts require {floor.verdict!r}: "
           + "; ".join(describe(f) for f in floor.facts)) if floor.facts else \
        f"reasoner said {result.verdict!r} but {floor.why}, which requires {floor.verdict!r}"
    return Guarded(floor.verdict, answer, set(result.load_bearing_ids) | {f.id for f in floor.facts},
                   reasoner_verdict=result.verdict, guardrail_override=why)
