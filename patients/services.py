"""The patients app's public interface.

Exposure (used by the sweep for proactive notices)
    exposed_patients(fact)                       -> list[Exposure]
    exposed_patients_for_recall(recall_number)   -> list[Exposure]  (all believed facts of that recall)
Residency (used by /health and `manage.py status`)
    residency_report()                           -> dict
CSV import of dispensing lives in patients.csvimport.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, Q

from drugs import recall_terms
from drugs.identity import PRODUCT_PREFIX, distinctive_first_word, identity_key, is_product_key, product_words, readable
from drugs.lots import canonical_lot, near_lot_keys
from drugs.matching import MatchClass, explain, match
from drugs.scopes import dispensing_scopes
from memory.models import Decision, Fact
from patients.models import READ_WITH_DOUBT, DispensingRecord, Patient


class Match:
    LOT = "lot"    # the recall names this lot, and the patient received it
    DRUG = "drug"  # the recall names no lot (all lots of the drug), and the patient received the drug


@dataclass
class Exposure:
    patient: Patient
    dispensings: list[DispensingRecord]
    match: str  # Match.LOT or Match.DRUG
    fact: Fact
    ndc_products: list[str] = field(default_factory=list)  # the products the recall names
    match_class: MatchClass | None = None  # the strongest drugs.matching class over the dispensings
    rule: str = ""  # the drugs.matching rule behind that class ("same NDC product, lot near miss: ...")

    @property
    def why(self) -> str:
        what = readable(self.fact.subject) or "the recalled product"
        label = f" [{self.match_class.label}: {self.rule}]" if self.match_class and self.rule else (
            f" [{self.match_class.label}]" if self.match_class else "")
        if self.match == Match.LOT:
            return f"received lot {self.fact.lot} of {what}, which {self._recall} names{label}"
        narrowed = f" (NDC products {', '.join(self.ndc_products)})" if self.ndc_products else ""
        return f"received {what}{narrowed}; {self._recall} covers all lots{label}"

    @property
    def _recall(self) -> str:
        return recall_terms.recall_number(self.fact) or self.fact.fact_key


_STRENGTH = {MatchClass.CONFIRMED: 4, MatchClass.PRODUCT_ALL_LOTS: 3, MatchClass.PROBABLE: 2, MatchClass.CANDIDATE: 1}


def _group(fact, rows) -> list[Exposure]:
    """Rows that drugs.matching.match() accepts, grouped per patient, with the strongest class."""
    kind = Match.LOT if fact.lot and not recall_terms.is_drug_level(fact) else Match.DRUG
    products = sorted(recall_terms.products(fact))
    by_patient: dict[int, Exposure] = {}
    for row in rows:
        found = explain(fact, row.as_dispensed())
        if found is None:
            continue
        exposure = by_patient.get(row.patient_id)
        if exposure is None:
            exposure = by_patient[row.patient_id] = Exposure(row.patient, [], kind, fact, products, found.klass,
                                                             found.rule)
        exposure.dispensings.append(row)
        if _STRENGTH[found.klass] > _STRENGTH[exposure.match_class]:
            exposure.match_class, exposure.rule = found.klass, found.rule
    return list(by_patient.values())


def _ordered(rows):
    return rows.select_related("patient").order_by("patient_id", "dispensed_at", "id")


def exposed_patients(fact: Fact, *, candidates: bool = True, unless_standing_on=None) -> list[Exposure]:
    """The patients a recall fact touches, with the dispensing rows that matched, why and how surely
    (drugs.matching). Lot-level fact: rows with that lot or a near miss of it (dispensing_lot_near
    index) whose product or identity agrees, plus the drug's rows with an unknown lot (candidates).
    Drug-level fact: rows of the drug or of the products it names. candidates=False leaves out the unknown-lot rows of a
    lot-level fact (the lot -> patients lookup alone). unless_standing_on=[scopes]: leave out, in the
    same query (an anti-join), rows whose patient has a standing decision about that row's medicine
    (its subject is the row's identity) resting on any of those scopes: its re-decision tells them."""
    rows = exposure_rows(fact, candidates=candidates)
    if rows is None:
        return []
    if unless_standing_on:
        # Only a standing decision about this row's own medicine that rests on one of the scopes is
        # re-decided for it: one about another drug that shares only the lot scope (lot:~) is not.
        rows = rows.exclude(Exists(Decision.objects.filter(
            premise_set__members__scope__in=list(unless_standing_on), status=Decision.Status.STANDING,
            patient_id=OuterRef("patient_id"), subject=OuterRef("drug"))))
    return _group(fact, rows)


def named_product_rows(facts) -> Q:
    """Rows of a product the vocabulary cannot name (keyed by its text, `product:...`) whose text begins
    as one of these recalls' does, or holds its first distinctive word ("product:ultra armor" for a recall
    of "ULTRA ARMOR"): its subject's first word when the subject is a product text, and the first
    distinctive word of each product name it prints (a brand typed at the till while the recall was
    reduced to an ingredient). drugs.matching then compares the texts. Only product-text rows are read
    (a range of the drug index), never rows named by ingredients."""
    words = set()
    for fact in facts:
        if is_product_key(fact.subject) and product_words(fact.subject):
            words.add(product_words(fact.subject)[0])
        words.update(distinctive_first_word(name) for name in recall_terms.product_names(fact))
    named = Q(pk__in=[])
    for word in sorted(words - {""}):
        named |= Q(drug__startswith=f"{PRODUCT_PREFIX}{word}") | \
            (Q(drug__startswith=PRODUCT_PREFIX) & Q(drug__contains=f" {word}"))
    return named


def exposure_rows(fact: Fact, *, candidates: bool = True):
    """The dispensing queryset exposure reads for a fact, before drugs.matching.match() filters it
    (bench/exposure.py EXPLAINs it); None for a non-recall fact.

    Package first: a lot-level fact reads every row whose lot is the recalled lot or a near miss of it
    (`lot_near`, indexed), or whose lot field may hold it (`lot_alternatives`, GIN-indexed: a field
    not read cleanly, drugs.lot_field), whatever its name says, and drugs.matching decides by NDC product, then
    ingredients, then product text; plus the unknown-lot rows of the drug or its products
    (candidates). A drug-level fact reads the rows of the drug, of the products it names, or, for a
    product the vocabulary cannot name, rows whose product text starts with the same word."""
    if not recall_terms.is_recall(fact):
        return None
    products = sorted(recall_terms.products(fact))
    by_identity = Q(drug=fact.subject) if fact.subject else Q(pk__in=[])
    by_product = Q(ndc_product__in=products) if products else Q(pk__in=[])
    by_identity |= named_product_rows([fact])
    if fact.lot and not recall_terms.is_drug_level(fact):
        lot_rows = Q(lot_near__in=sorted(near_lot_keys(fact.lot)), lot_unknown=False) | \
            (READ_WITH_DOUBT & Q(lot_alternatives__contains=[canonical_lot(fact.lot)]))
        if candidates:
            lot_rows |= (by_identity | by_product) & Q(lot_unknown=True)
        return _ordered(DispensingRecord.objects.filter(lot_rows))
    return _ordered(DispensingRecord.objects.filter(by_identity | by_product))


def active_recalls_for_dispensing(record: DispensingRecord) -> list[Fact]:
    """Believed, still-active recall facts that apply to this dispensing (drugs.matching.match, the
    same rule as exposure). Used to warn staff who register a lot that is already recalled."""
    dispensing = record.as_dispensed()  # also before the row is saved (CSV import checks first)
    product = dispensing.ndc_product
    lot = "" if record.lot_unknown else canonical_lot(record.lot)
    drug = record.drug or identity_key(record.drug_text, record.product_description)[0]
    # The scopes a decision about this row would rest on (GIN-indexed overlap): its drug and product
    # at its lot and at the drug level, and its lot's near key (a repackaged or unnamed product).
    wanted = dispensing_scopes(drug, lot, product)
    if not wanted:
        return []
    related = Q(scopes__overlap=wanted) | (Q(subject=drug) if drug else Q(pk__in=[]))
    candidates = Fact.objects.believed().defer("embedding").filter(Q(kind=Fact.Kind.RECALL) & related)
    return [fact for fact in candidates if recall_terms.is_active(fact) and match(fact, dispensing) is not None]


def recall_warning(records) -> str:
    """One readable warning for dispensing rows that hit active recalls, or ''."""
    lines = []
    for record in records:
        for fact in active_recalls_for_dispensing(record):
            attrs = fact.attributes or {}
            # A fact without a subject still names its product: identity_text is kept in the fact itself
            # (the long product description may be stored once per record version, out of reach here).
            product = (fact.subject or attrs.get("product_description") or attrs.get("identity_text")
                       or fact.statement)[:60]
            scope = f"lot {fact.lot}" if fact.lot else f"all lots of {product}"
            lines.append(f"{record.drug or record.drug_text} lot {record.lot_label} for "
                         f"{record.patient.display_name}: {attrs.get('classification', '')} recall "
                         f"{attrs.get('recall_number', '')} ({attrs.get('status', '')}) covers {scope} "
                         f"[{match(fact, record.as_dispensed()).label}]")
    if not lines:
        return ""
    return ("Saved, but this dispensing is under an active recall — tell a pharmacist before the patient "
            "takes it: " + "; ".join(lines[:10]) + (f"; and {len(lines) - 10} more" if len(lines) > 10 else ""))


def exposed_patients_for_recall(recall_number: str) -> list[Exposure]:
    """Exposures over every believed fact of one recall."""
    facts = list(
        Fact.objects.believed()
        .filter(kind=Fact.Kind.RECALL, fact_key__startswith=recall_terms.key_prefix(recall_number))
        .defer("embedding")
        .order_by("fact_key")
    )
    exposures: list[Exposure] = []
    lot_facts = [f for f in facts if f.lot and not recall_terms.is_drug_level(f)]
    for fact in facts:
        if fact not in lot_facts:
            exposures.extend(exposed_patients(fact))
    if lot_facts:
        # One dispensing query for all the lots of the recall (a recall can name hundreds): every row
        # with one of its lots or a near miss of one, and the unknown-lot rows of its drugs or products.
        subjects = {f.subject for f in lot_facts if f.subject}
        products = set().union(*(recall_terms.products(f) for f in lot_facts))
        related = Q(drug__in=subjects) | Q(ndc_product__in=products) | named_product_rows(lot_facts)
        near = sorted(set().union(*(near_lot_keys(f.lot) for f in lot_facts)))
        recalled = sorted({canonical_lot(f.lot) for f in lot_facts})
        rows = list(_ordered(DispensingRecord.objects.filter(
            Q(lot_near__in=near, lot_unknown=False) | (READ_WITH_DOUBT & Q(lot_alternatives__overlap=recalled))
            | (related & Q(lot_unknown=True)))))
        by_near, by_alternative = defaultdict(list), defaultdict(list)
        unknown = [row for row in rows if row.lot_unknown]
        for row in rows:
            if not row.lot_unknown:
                by_near[row.lot_near].append(row)
                for other in row.lot_alternatives:
                    by_alternative[other].append(row)
        for fact in lot_facts:
            mine = {row.pk: row for key in sorted(near_lot_keys(fact.lot)) for row in by_near.get(key, [])}
            mine.update((row.pk, row) for row in by_alternative.get(canonical_lot(fact.lot), []))
            exposures.extend(_group(fact, list(mine.values()) + unknown))
    exposures.sort(key=lambda e: (e.patient.id, e.fact.fact_key))
    return exposures


# --- Residency ------------------------------------------------------------------------------

RESIDENT_TABLES = {"patients": Patient, "dispensing_records": DispensingRecord}


def _probe(report: dict, key: str, sql: str, shape):
    """Run one read-only probe; a refusal is reported under `key`, never raised (health must render)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:  # savepoint: a failure doesn't poison the caller
            cursor.execute(sql)
            columns = [c.name for c in cursor.description]
            report[key] = shape([dict(zip(columns, row, strict=True)) for row in cursor.fetchall()])
    except Exception as exc:
        report[key] = {"error": str(exc)}


def residency_report() -> dict:
    """Where patient rows live, per table and region.

    PostgreSQL: one place; counts per `region` column (what residency *would* be).
    CockroachDB: counts per computed `home` column, the table's locality, its partitions' zone
    configs (SHOW PARTITIONS) and the leaseholder locality of its ranges (SHOW RANGES).
    """
    vendor = connection.vendor
    report = {"engine": vendor, "regions": list(settings.UNSAY_REGIONS), "tables": {}}
    if vendor != "cockroachdb":
        report["note"] = "one database in one place: counts are by the region column, not physical placement"
    for label, model in RESIDENT_TABLES.items():
        table = model._meta.db_table
        entry: dict = {"table": table}
        counts = model.objects.values("region").annotate(n=Count("id")).order_by("region")
        entry["rows_by_region"] = {row["region"]: row["n"] for row in counts}
        if vendor == "cockroachdb":
            _probe(entry, "locality", f"SHOW CREATE TABLE {table}", _locality)
            if "REGIONAL BY ROW" not in str(entry["locality"]):
                report["tables"][label] = entry
                continue  # single-region cluster (020 SQL skipped): no home column, no partitions
            _probe(entry, "rows_by_home", f"SELECT home::STRING AS home, count(*) AS n FROM {table} GROUP BY home",
                   lambda rows: {r["home"]: r["n"] for r in rows})
            _probe(entry, "partitions", f"SHOW PARTITIONS FROM TABLE {table}",
                   lambda rows: [{"partition": r.get("partition_name"), "index": r.get("index_name"),
                                  "zone_config": r.get("zone_config")} for r in rows])
            _probe(entry, "ranges_by_leaseholder_region",
                   f"SELECT lease_holder_locality FROM [SHOW RANGES FROM TABLE {table} WITH DETAILS]",
                   _leaseholder_regions)
        report["tables"][label] = entry
    return report


def _locality(rows) -> str:
    text = " ".join(str(v) for row in rows for v in row.values())
    marker = text.upper().find("LOCALITY")
    return text[marker:].split(";")[0].strip() if marker >= 0 else "REGIONAL BY TABLE (default)"


def _leaseholder_regions(rows) -> dict:
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        locality = str(row.get("lease_holder_locality") or "")
        region = next((part.split("=", 1)[1] for part in locality.split(",") if part.startswith("region=")), "?")
        counts[region] += 1
    return dict(counts)


def residency_section() -> dict:
    """Section for core.health (registered in PatientsConfig.ready)."""
    return {"residency": residency_report()}
