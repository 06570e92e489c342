"""The guardrail around every reasoner.

Whatever a reasoner says, the verdict may not be weaker than the structured facts in the retrieved
set demand: a Class I recall on a lot this patient received requires "stop"; any other recall on
their lot, or a drug-level recall that applies to their drug, requires at least "caution" — closed
(terminated) recalls included, since closing a recall does not make a dispensed recalled pack safe;
a recall of some lots of their drug with their lot unrecorded also requires "caution". A weaker
verdict is raised, the reasoner's own verdict and the reason are kept for the decision record, and
the facts that forced it become load-bearing.
"""

from dataclasses import dataclass, field

from ask.rules import AskContext, ReasonerResult, RulesReasoner, describe, recall_reading

SEVERITY = {"safe": 0, "unknown": 1, "caution": 2, "stop": 3}


@dataclass
class Floor:
    verdict: str
    facts: list = field(default_factory=list)


def floor_for(ctx: AskContext) -> Floor | None:
    """The weakest verdict the facts allow, with the facts that demand it; None if anything goes."""
    # Closed recalls count: a pack from a recalled lot is not made safe by FDA closing the recall.
    reading = recall_reading(ctx)  # (fact, class, on their lot, drug-level applies, lot-unknown candidate)
    class_one = [f for f, klass, on_lot, _drug_level, _unknown in reading if on_lot and klass == "Class I"]
    if class_one:
        return Floor("stop", class_one)
    caution = [f for f, klass, on_lot, drug_level, unknown in reading
               if (on_lot and klass != "Class I") or drug_level or unknown]
    if caution:
        return Floor("caution", caution)
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
           + "; ".join(describe(f) for f in floor.facts))
    return Guarded(floor.verdict, answer, set(result.load_bearing_ids) | {f.id for f in floor.facts},
                   reasoner_verdict=result.verdict, guardrail_override=why)
