"""Preview an escalation before publishing it: which answers would change, who would get a notice.

Nothing is written. The recall's believed fact versions are copied in memory with the new
classification, and each standing decision that rests on them is re-decided with the same
ask.services.decide() (same retrieval, same reasoner, same guardrail) through a reasoner wrapper that
shows the reasoner the hypothetical versions instead of the stored ones.
"""

import copy

from ask.reasoners import get_reasoner
from drugs.lots import canonical_lot
from drugs.recall_terms import key_prefix
from memory.models import Decision, Fact
from memory.retrieval import Retrieved
from patients.selectors import attach_patients

from .recall_letters import worsened
from .sweep.decider import SharedDecider
from .sweep.notices import exposed_patients_of, notice_question
from .sweep.report import SweepReport, reference_of


class HypotheticalReasoner:
    """Delegates to the configured reasoner after swapping in hypothetical fact versions."""

    def __init__(self, inner, overrides: dict[int, Fact]):
        self.inner = inner
        self.overrides = overrides
        self.uses_model = getattr(inner, "uses_model", False)
        self.identity = getattr(inner, "identity", "")

    def decide(self, ctx):
        # The guardrail reads the same ctx afterwards, so it sees the hypothetical versions too.
        ctx.retrieved = [Retrieved(self.overrides.get(r.fact.id, r.fact), r.score, r.match) for r in ctx.retrieved]
        return self.inner.decide(ctx)


def hypothetical_escalation(recall_number: str, classification: str, lot: str | None = None) -> dict[int, Fact]:
    """fact id -> an unsaved copy of that believed version with the new classification."""
    # fact_key__startswith uses the fact_key index; attributes__recall_number would scan every recall.
    facts = Fact.objects.believed().defer("embedding").filter(kind=Fact.Kind.RECALL,
                                                              fact_key__startswith=key_prefix(recall_number))
    overrides = {}
    for fact in facts:
        if lot and canonical_lot(fact.lot) != canonical_lot(lot):
            continue
        twin = copy.copy(fact)
        twin.attributes = dict(fact.attributes or {}, classification=classification)
        overrides[fact.id] = twin
    if not overrides:
        where = f" lot {lot}" if lot else ""
        raise LookupError(f"no believed recall fact for {recall_number}{where}")
    return overrides


def preview_escalation(recall_number: str, classification: str, lot: str | None = None,
                       page_size: int = 500) -> SweepReport:
    overrides = hypothetical_escalation(recall_number, classification, lot)
    reasoner = HypotheticalReasoner(get_reasoner(), overrides)
    decider = SharedDecider(reasoner=reasoner)
    report = SweepReport()
    after = 0
    while True:
        page = attach_patients(Decision.objects.standing().filter(id__gt=after, read_set__members__load_bearing=True,
                                                                  read_set__members__fact_id__in=list(overrides))
                               .distinct().order_by("id")[:page_size])
        if not page:
            break
        decider.reset()
        decider.preload({d.patient_id for d in page if d.patient_id})
        for decision in page:
            outcome, _shared = decider.decide(decision.patient, decision.question, decision.subject)
            changed = outcome.verdict != decision.verdict
            report.examined += 1
            report.corrected += changed
            report.reaffirmed += not changed
            report.preview.append({"decision": decision.id, "patient_ref": reference_of(decision.patient),
                                   "question": decision.question, "old_verdict": decision.verdict,
                                   "new_verdict": outcome.verdict, "changed": changed, "recall_number": recall_number})
        after = page[-1].id
    for fact_id, twin in overrides.items():
        before = Fact.objects.defer("embedding").get(pk=fact_id)
        if not worsened(before, twin):
            continue
        for patient, match, _match_class, rows in exposed_patients_of(twin, who_never_asked=True):
            question, subject = notice_question(rows)
            outcome, _shared = decider.decide(patient, question, subject or twin.subject)
            report.notices += 1
            report.preview.append({"notice": True, "patient_ref": patient.external_ref, "match": match,
                                   "new_verdict": outcome.verdict, "recall_number": recall_number})
    report.reasoner_calls = decider.calls
    return report
