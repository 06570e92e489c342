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
from django.db.models import Count, Q
from django.db.models.functions import Left

from memory.models import Fact
from recalls.normalize import ndc_products, normalize_drug_name, normalize_lot

from .models import DispensingRecord, Patient


class Match:
    LOT = "lot"    # the recall names this lot, and the patient received it
    DRUG = "drug"  # the recall names no lot (all lots of the drug), and the patient received the drug


@dataclass
class Exposure:
    patient: Patient
    dispensings: list[DispensingRecord]
    match: str  # Match.LOT or Match.DRUG
    fact: Fact
    ndc_products: list[str] = field(default_factory=list)  # the recall's products a drug-level match was narrowed to

    @property
    def why(self) -> str:
        if self.match == Match.LOT:
            return f"received lot {self.fact.lot} of {self.fact.subject}, which {self._recall} names"
        narrowed = f" (NDC products {', '.join(self.ndc_products)} or NDC unknown)" if self.ndc_products else ""
        return f"received {self.fact.subject}{narrowed}; {self._recall} covers all lots"

    @property
    def _recall(self) -> str:
        return (self.fact.attributes or {}).get("recall_number") or self.fact.fact_key


def _group(fact, rows, match, products) -> list[Exposure]:
    by_patient: dict[int, Exposure] = {}
    for row in rows:
        exposure = by_patient.get(row.patient_id)
        if exposure is None:
            exposure = by_patient[row.patient_id] = Exposure(row.patient, [], match, fact, products)
        exposure.dispensings.append(row)
    return list(by_patient.values())


def _drug_level_rows(subject, products):
    rows = DispensingRecord.objects.filter(drug=subject)
    if products:
        # The recall lists its products: a dispensing of another maker's product of the same drug is
        # not exposed. A dispensing with no NDC can't be told apart, so it stays in (fail safe).
        rows = rows.annotate(ndc_product=Left("ndc", 10)).filter(Q(ndc="") | Q(ndc_product__in=products))
    return rows


def _ordered(rows):
    return rows.select_related("patient").order_by("patient_id", "dispensed_at", "id")


def exposed_patients(fact: Fact) -> list[Exposure]:
    """The patients a recall fact touches, with the dispensing rows that matched and why.

    Lot-level fact: exact (drug, lot) match on the dispensing_drug_lot index. Drug-level fact (no
    lot): every dispensing of the drug, narrowed to the recall's NDC products when it lists any.
    """
    rows, match, products = exposure_rows(fact)
    return _group(fact, rows, match, products) if rows is not None else []


def exposure_rows(fact: Fact):
    """(dispensing queryset, match kind, NDC products narrowed to) for a fact; (None, "", []) if it
    names no drug. The queryset is what exposed_patients runs (bench/exposure.py EXPLAINs it)."""
    subject = normalize_drug_name(fact.subject)
    if not subject:
        return None, "", []
    if fact.lot:
        return _ordered(DispensingRecord.objects.filter(drug=subject, lot=normalize_lot(fact.lot))), Match.LOT, []
    products = sorted(ndc_products((fact.attributes or {}).get("ndcs")))
    return _ordered(_drug_level_rows(subject, products)), Match.DRUG, products


def active_recalls_for_dispensing(record: DispensingRecord) -> list[Fact]:
    """Believed, still-active recall facts that cover this dispensing: its exact (drug, lot), or a
    drug-level recall of its drug (narrowed by NDC product like exposure). Used to warn staff who
    register a lot that is already recalled; the same matching rules as exposed_patients()."""
    from memory.reasoners import is_active

    hits = []
    candidates = (Fact.objects.believed().defer("embedding")
                  .filter(kind=Fact.Kind.RECALL, subject=normalize_drug_name(record.drug))
                  .filter(Q(lot=normalize_lot(record.lot)) | Q(lot__isnull=True)))
    for fact in candidates:
        if not is_active(fact):
            continue
        products = ndc_products((fact.attributes or {}).get("ndcs"))
        if fact.lot is None and products and record.ndc and record.ndc[:10] not in products:
            continue  # a drug-level recall of another maker's product
        hits.append(fact)
    return hits


def recall_warning(records) -> str:
    """One readable warning for dispensing rows that hit active recalls, or ''."""
    lines = []
    for record in records:
        for fact in active_recalls_for_dispensing(record):
            attrs = fact.attributes or {}
            scope = f"lot {fact.lot}" if fact.lot else f"all lots of {fact.subject}"
            lines.append(f"{record.drug} lot {record.lot_label} for {record.patient.display_name}: "
                         f"{attrs.get('classification', '')} recall {attrs.get('recall_number', '')} "
                         f"({attrs.get('status', '')}) covers {scope}")
    if not lines:
        return ""
    return ("Saved, but this dispensing is under an active recall — tell a pharmacist before the patient "
            "takes it: " + "; ".join(lines[:10]) + (f"; and {len(lines) - 10} more" if len(lines) > 10 else ""))


def exposed_patients_for_recall(recall_number: str) -> list[Exposure]:
    """Exposures over every believed fact of one recall. Lot facts of one drug share one query."""
    facts = list(
        Fact.objects.believed()
        .filter(kind=Fact.Kind.RECALL, fact_key__startswith=f"recall:{recall_number}:")
        .defer("embedding")
        .order_by("fact_key")
    )
    exposures: list[Exposure] = []
    lot_facts: dict[str, dict[str, Fact]] = defaultdict(dict)  # subject -> lot -> fact
    for fact in facts:
        subject = normalize_drug_name(fact.subject)
        if fact.lot and subject:
            lot_facts[subject][normalize_lot(fact.lot)] = fact
        elif subject:
            exposures.extend(exposed_patients(fact))
    for subject, by_lot in lot_facts.items():
        rows = _ordered(DispensingRecord.objects.filter(drug=subject, lot__in=list(by_lot)))
        per_lot = defaultdict(list)
        for row in rows:
            per_lot[row.lot].append(row)
        for lot, fact in by_lot.items():
            exposures.extend(_group(fact, per_lot.get(lot, []), Match.LOT, []))
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
    """Section for unsay_site.health (registered in PatientsConfig.ready)."""
    return {"residency": residency_report()}
