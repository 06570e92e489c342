"""The demo's escalation: a real recall's believed facts re-asserted with another classification
(source demo:escalation), as if FDA had reclassified it. Demo and test tooling, not a product path:
real reclassifications arrive through ingestion."""

from dataclasses import dataclass

from core.retry import run_in_transaction
from drugs import recall_terms
from drugs.lots import printed_lot
from memory.fact_writes import prepare_claims, write_claims
from memory.models import Fact
from recalls.ingest import CLASSIFICATIONS, ESCALATION_SOURCE, RecallClaim, recall_statement


@dataclass
class Escalation:
    fact_key: str
    old_version: int
    new_version: int
    old_classification: str
    new_classification: str
    status: str  # "versioned" or "unchanged" (already that classification)
    old_fact_id: int
    new_fact_id: int  # the old one when unchanged


def escalate(recall_number: str, classification: str, lot: str | None = None, *, by: str = "demo") -> list[Escalation]:
    """Assert a new version of a real recall's believed fact(s) with another classification
    (statement rewritten to match), source demo:escalation, all in one transaction. Returns what
    was superseded."""
    if classification not in CLASSIFICATIONS:
        raise ValueError(f"classification must be one of {', '.join(CLASSIFICATIONS)}, not {classification!r}")
    # fact_key__startswith uses the fact_key index; attributes__recall_number would scan.
    facts = Fact.objects.believed().defer("embedding").filter(kind="recall",
                                                              fact_key__startswith=recall_terms.key_prefix(recall_number))
    if lot:
        facts = facts.filter(lot=printed_lot(lot))
    facts = list(facts.order_by("fact_key"))
    if not facts:
        where = f" lot {printed_lot(lot)}" if lot else ""
        raise LookupError(f"no believed recall fact for {recall_number}{where}; ingest it first")
    claims = []
    for fact in facts:
        attributes = dict(fact.attributes, classification=classification)
        all_lots = "recall covers every lot" in fact.statement
        claims.append(RecallClaim(
            fact_key=fact.fact_key, kind=fact.kind, subject=fact.subject, lot=fact.lot,
            statement=recall_statement(attributes, fact.lot, all_lots=all_lots), source=ESCALATION_SOURCE,
            attributes=attributes, source_ref=f"escalated from v{fact.version}", valid_from=fact.valid_from,
            valid_to=fact.valid_to, asserted_by=by,
        ))
    # One publication: every lot of the recall changes class in one transaction (and one sweep).
    prepared = prepare_claims(claims)
    results = run_in_transaction(
        lambda: write_claims(prepared, range(len(claims)),
                             reason=f"classification changed to {classification} (demo escalation)"),
        retry_unique_violations=True)
    return [
        Escalation(fact.fact_key, fact.version, result.fact.version, fact.attributes.get("classification", ""),
                   classification, result.status, fact.id, result.fact.id)
        for fact, result in zip(facts, results, strict=True)
    ]
