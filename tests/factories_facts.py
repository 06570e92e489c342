"""Build recall Claims (docs/facts.md shape) from REAL openFDA enforcement records.

A small stand-in for the recalls engineer's normaliser (recalls/ingest.py) so the ask tests don't
depend on it: the caller names the record (by recall number) and the lot, and we check that the lot
really appears in the record's code_info. Nothing is invented; patients and dispensing are synthetic.
"""

import functools
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path

from memory.services import Claim
from recalls.normalize import normalize_drug_name, normalize_lot, normalize_ndc

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "openfda"


@functools.cache
def _records_2021() -> dict:
    with zipfile.ZipFile(FIXTURES / "drug-enforcement-2021-04-28.json.zip") as archive:
        data = json.loads(archive.read(archive.namelist()[0]))
    return {r["recall_number"]: r for r in data["results"]}


@functools.cache
def _records_recent() -> dict:
    data = json.loads((FIXTURES / "drug-enforcement-recent-sample.json").read_text())
    return {r["recall_number"]: r for r in data["results"]}


def record(recall_number: str) -> dict:
    found = _records_2021().get(recall_number) or _records_recent().get(recall_number)
    if found is None:
        raise KeyError(f"{recall_number} is not in the openFDA fixtures")
    return found


def _date(raw):
    if not raw:
        return None
    return datetime.strptime(raw, "%Y%m%d").replace(tzinfo=UTC)


def _iso(raw):
    return _date(raw).date().isoformat() if raw else None


def subject_of(rec: dict) -> str:
    generic = (rec.get("openfda") or {}).get("generic_name") or []
    return normalize_drug_name(generic[0] if generic else rec["product_description"])


def ndcs_of(rec: dict) -> list[str]:
    """Package NDCs (5-4-2) from the record's openfda block, where derivable."""
    found = set()
    for raw in (rec.get("openfda") or {}).get("package_ndc") or []:
        try:
            found.add(normalize_ndc(raw))
        except ValueError:
            continue
    return sorted(found)


def recall_claim(recall_number: str, lot: str | None = None, *, source="openfda:enforcement", **overrides) -> Claim:
    """A lot-level claim (lot given; must occur in code_info) or a drug-level claim (lot None)."""
    rec = dict(record(recall_number), **overrides)
    if lot is not None and normalize_lot(lot) not in normalize_lot(rec["code_info"]):
        raise ValueError(f"lot {lot!r} does not appear in {recall_number}'s code_info")
    norm_lot = normalize_lot(lot) if lot is not None else None
    scope = "lot" if norm_lot else "drug"
    key = f"recall:{recall_number}:lot:{norm_lot}" if norm_lot else f"recall:{recall_number}:drug"
    where = f"lot {norm_lot}" if norm_lot else "all lots"
    statement = (f"{rec['classification']} recall {recall_number} ({rec['status']}) of "
                 f"{rec['product_description'][:200]} {where} by {rec['recalling_firm']}: {rec['reason_for_recall']}")
    return Claim(
        fact_key=key, kind="recall", subject=subject_of(rec), lot=norm_lot, statement=statement, source=source,
        source_ref=recall_number, valid_from=_date(rec.get("recall_initiation_date")),
        valid_to=_date(rec.get("termination_date")),
        attributes={
            "recall_number": recall_number, "event_id": rec.get("event_id"),
            "classification": rec["classification"], "status": rec["status"], "scope": scope,
            "reason": rec["reason_for_recall"], "firm": rec["recalling_firm"],
            "product_description": rec["product_description"], "ndcs": ndcs_of(rec),
            "distribution": rec.get("distribution_pattern"), "report_date": _iso(rec.get("report_date")),
            "recall_initiation_date": _iso(rec.get("recall_initiation_date")),
            "termination_date": _iso(rec.get("termination_date")), "code_info": rec["code_info"][:2000],
        },
    )
