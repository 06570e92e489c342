"""Which patients a recall exposes and how surely: patient id -> strongest match class, read the way
patients.services.exposed_patients_for_recall reads it, grouped so drugs.matching.match() runs once per
distinct dispensing."""

from datetime import UTC

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Q
from django.db.models.functions import TruncDate

from drugs import recall_terms
from drugs.lots import canonical_lot, near_lot_key, near_lot_keys
from drugs.matching import CERTAINTY_RANK, Dispensed, match
from memory.models import Fact
from patients.models import READ_WITH_DOUBT, DispensingRecord
from patients.services import exposed_patients_for_recall, exposure_rows, named_product_rows

from .match_classes import LEGACY_MATCH_CLASS


def _exposed_patient_ids(recall_number: str) -> dict[int, str]:
    """patient id -> strongest match class, the definition: every Exposure that
    patients.services.exposed_patients_for_recall builds (model instances; the tests' reference)."""
    out: dict[int, str] = {}
    for exposure in exposed_patients_for_recall(recall_number):
        klass = str(exposure.match_class) if exposure.match_class else LEGACY_MATCH_CLASS.get(exposure.match,
                                                                                             "candidate")
        known = out.get(exposure.patient.id)
        if known is None or CERTAINTY_RANK.get(klass, 9) < CERTAINTY_RANK.get(known, 9):
            out[exposure.patient.id] = klass
    return out


# drugs.matching.match() reads only these columns of a dispensing (and the day it was dispensed), so
# it is asked once per distinct combination instead of once per row: a recall with 8,000 patients
# on one lot is a handful of calls. The rule itself stays in drugs.matching.
MATCH_INPUTS = ["drug", "ndc_product", "ndc", "lot", "lot_unknown", "expiry", "day", "lot_alternatives"]


def _match_groups(rows):
    return (rows.order_by().annotate(day=TruncDate("dispensed_at", tzinfo=UTC)).values(*MATCH_INPUTS)
            .annotate(patients=ArrayAgg("patient_id")))  # a patient may repeat: harmless


def _as_dispensing(group) -> Dispensed:
    return Dispensed(drug=group["drug"], ndc_product=group["ndc_product"], ndc=group["ndc"], lot=group["lot"],
                     lot_known=not group["lot_unknown"], expiry=group["expiry"], dispensed_at=group["day"],
                     lot_alternatives=tuple(group["lot_alternatives"] or ()))


def exposure_classes(recall_number: str) -> dict[int, str]:
    """patient id -> strongest match class over every believed fact of the recall: the same rows as
    patients.services.exposed_patients_for_recall (its exposure_rows per fact; all lots of the recall
    in one query), grouped in SQL by what drugs.matching.match() reads, match() once per group.
    tests/worklist/test_worklist_sql.py checks it equals _exposed_patient_ids on real recall data."""
    facts = list(Fact.objects.believed().filter(kind=Fact.Kind.RECALL,
                                                fact_key__startswith=recall_terms.key_prefix(recall_number))
                 .defer("embedding").order_by("fact_key"))
    out: dict[int, str] = {}

    def take(fact, groups):
        for group in groups:
            found = match(fact, _as_dispensing(group))
            if found is None:
                continue
            klass = str(found)
            for patient_id in group["patients"]:
                known = out.get(patient_id)
                if known is None or CERTAINTY_RANK[klass] < CERTAINTY_RANK[known]:
                    out[patient_id] = klass

    lot_facts = [f for f in facts if f.lot and not recall_terms.is_drug_level(f)]
    for fact in facts:
        if fact not in lot_facts:
            rows = exposure_rows(fact)
            if rows is not None:
                take(fact, _match_groups(rows))
    if lot_facts:
        # The rows exposed_patients_for_recall reads: every row with one of the recall's lots or a near
        # miss of one (any name), and the unknown-lot rows of its drugs or products.
        subjects = {f.subject for f in lot_facts if f.subject}
        products = set().union(*(recall_terms.products(f) for f in lot_facts))
        near = sorted(set().union(*(near_lot_keys(f.lot) for f in lot_facts)))
        recalled = sorted({canonical_lot(f.lot) for f in lot_facts})
        groups = list(_match_groups(DispensingRecord.objects.filter(
            Q(lot_near__in=near, lot_unknown=False) | (READ_WITH_DOUBT & Q(lot_alternatives__overlap=recalled))
            | ((Q(drug__in=subjects) | Q(ndc_product__in=products) | named_product_rows(lot_facts))
               & Q(lot_unknown=True)))))
        by_near: dict[str, list] = {}
        by_alternative: dict[str, list] = {}
        unknown = []
        for group in groups:
            if group["lot_unknown"]:
                unknown.append(group)
                continue
            by_near.setdefault(near_lot_key(group["lot"]), []).append(group)
            for other in group["lot_alternatives"] or ():
                by_alternative.setdefault(other, []).append(group)
        for fact in lot_facts:
            mine = [g for key in sorted(near_lot_keys(fact.lot)) for g in by_near.get(key, [])]
            mine += [g for g in by_alternative.get(canonical_lot(fact.lot), []) if g not in mine]
            take(fact, mine + unknown)
    return out
