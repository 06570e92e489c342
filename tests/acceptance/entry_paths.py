"""Recording a corpus row the way a pharmacy would, through each entry path of the product.

    record_rows(rows, admin_client=..., client=..., secret=...) -> {row id: Entered}

Paths: the admin add view (Django test client, as staff use it), the CSV import
(patients.csvimport.import_dispensing_csv), POST /api/v1/dispensing with a pharmacy key, POST
/api/v1/fhir/MedicationDispense (the lot in Medication.batch.lotNumber), and the GS1 scan (the admin
form's `scan` field or the CSV `scan` column, alternately). A row a path refuses is recorded as refused
with the path's own words; the harness then checks that nothing of it was written.
"""

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime

from patients.csvimport import import_dispensing_csv

CSV_COLUMNS = ["patient_ref", "drug", "product_description", "ndc", "lot", "expiry", "serial", "scan", "quantity",
               "dispensed_at", "site"]


@dataclass
class Entered:
    accepted: bool
    error: str = ""  # the path's own words when it refused the row
    via: str = ""    # for the scan path: the admin form or the CSV column


def _text(value) -> str:
    return "" if value is None else str(value)


# --- admin form ---------------------------------------------------------------------------------

def by_admin(admin_client, patient_pk: int, entry: dict) -> Entered:
    dispensed = entry["dispensed_at"]
    try:
        instant = datetime.fromisoformat(dispensed)
        day, clock = instant.strftime("%Y-%m-%d"), instant.strftime("%H:%M:%S")
    except ValueError:  # a malformed date goes in as typed
        day, clock = dispensed, ""
    response = admin_client.post("/admin/patients/dispensingrecord/add/", {
        "patient": patient_pk, "scan": _text(entry.get("scan")), "drug": _text(entry.get("drug")),
        "product_description": _text(entry.get("product_description")), "ndc": _text(entry.get("ndc")),
        "lot": _text(entry.get("lot")), "expiry": _text(entry.get("expiry")), "serial": _text(entry.get("serial")),
        "quantity": _text(entry.get("quantity")), "dispensed_at_0": day, "dispensed_at_1": clock,
        "site": _text(entry.get("site"))})
    if response.status_code == 302:
        return Entered(True)
    if response.context and "adminform" in response.context:
        errors = response.context["adminform"].form.errors
        return Entered(False, "; ".join(f"{name}: {' '.join(messages)}" for name, messages in errors.items()))
    return Entered(False, f"HTTP {response.status_code}")


# --- CSV ----------------------------------------------------------------------------------------

def _csv(entries: list[tuple[str, dict]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for ref, entry in entries:
        writer.writerow([ref, *(_text(entry.get(name)) for name in CSV_COLUMNS[1:])])
    return out.getvalue()


def by_csv(entries: list[tuple[str, str, dict]]) -> dict[str, Entered]:
    """(row id, patient ref, entry) rows in one file. A file with any bad row imports nothing (the
    import's rule), so the refused rows are taken out and the rest imported again, as staff would."""
    results: dict[str, Entered] = {}
    pending = list(entries)
    while pending:
        result = import_dispensing_csv(_csv([(ref, entry) for _, ref, entry in pending]).encode(),
                                       actor="acceptance corpus (csv)", synthetic=True)
        if result.ok:
            results.update({row_id: Entered(True) for row_id, _, _ in pending})
            return results
        by_row = {}
        for error in result.errors:
            by_row.setdefault(error.row, []).append(error.reason)
        if 0 in by_row or not by_row:
            for row_id, _, _ in pending:
                results[row_id] = Entered(False, "file refused: " + " ".join(by_row.get(0, [])))
            return results
        kept = []
        for number, item in enumerate(pending, start=2):  # spreadsheet rows: the header is row 1
            if number in by_row:
                results[item[0]] = Entered(False, " ".join(by_row[number]))
            else:
                kept.append(item)
        pending = kept
    return results


# --- API and FHIR ----------------------------------------------------------------------------------

def _post(client, path: str, body: dict, secret: str, content_type: str) -> Entered:
    response = client.post(f"/api/v1{path}", data=json.dumps(body), content_type=content_type,
                           headers={"Authorization": f"Bearer {secret}"})
    if response.status_code == 201:
        return Entered(True)
    try:
        problem = response.json()
    except ValueError:
        return Entered(False, f"HTTP {response.status_code}")
    if problem.get("resourceType") == "OperationOutcome":  # the FHIR endpoints refuse in FHIR's own terms
        issues = problem.get("issue") or []
        details = "; ".join(f"{', '.join(i.get('expression') or [])}: {i.get('diagnostics', '')}" for i in issues)
        return Entered(False, f"HTTP {response.status_code} {details}".strip())
    details = "; ".join(f"{e.get('field')}: {e.get('message')}" for e in problem.get("errors") or [])
    return Entered(False, f"HTTP {response.status_code} {problem.get('title', '')} {problem.get('detail', '')} "
                          f"{details}".strip())


def by_api(client, ref: str, entry: dict, secret: str) -> Entered:
    body = {"patient": ref, "drug": _text(entry.get("drug")),
            "product_description": _text(entry.get("product_description")), "ndc": _text(entry.get("ndc")),
            "lot": _text(entry.get("lot")), "quantity": entry.get("quantity"), "dispensed_at": entry["dispensed_at"],
            "site": _text(entry.get("site"))}
    if entry.get("expiry"):
        body["expiry"] = entry["expiry"]
    return _post(client, "/dispensing", body, secret, "application/json")


def fhir_document(ref: str, entry: dict) -> dict:
    coding = [{"system": "http://hl7.org/fhir/sid/ndc", "code": entry["ndc"]}] if entry.get("ndc") else []
    batch = {"lotNumber": _text(entry.get("lot"))}
    if entry.get("expiry"):
        batch["expirationDate"] = entry["expiry"]
    reference = entry.get("fhir_reference") or "#med1"
    return {
        "resourceType": "MedicationDispense", "status": entry.get("fhir_status") or "completed",
        "contained": [{"resourceType": "Medication", "id": "med1",
                       "code": {"coding": coding, "text": entry.get("drug") or entry.get("product_description")},
                       "batch": batch}],
        "medicationReference": {"reference": reference},
        "subject": {"reference": entry.get("fhir_subject") or f"Patient/{ref}"},
        "quantity": {"value": entry.get("quantity")}, "whenHandedOver": entry["dispensed_at"]}


def by_fhir(client, ref: str, entry: dict, secret: str) -> Entered:
    return _post(client, "/fhir/MedicationDispense", fhir_document(ref, entry), secret, "application/fhir+json")


# --- every row ----------------------------------------------------------------------------------------

def scan_via(row: dict) -> str:
    """The scan path alternates between the admin form's scan field and the CSV scan column."""
    return "admin" if int(row["id"].split("-")[1]) % 2 else "csv"


def record_rows(rows: list[dict], patients: dict, *, admin_client, client, secret: str,
                entry_of=lambda row: row["entry"]) -> dict[str, Entered]:
    """Record each row through its path; CSV rows (and CSV scans) in one file per call."""
    results: dict[str, Entered] = {}
    csv_rows = []
    for row in rows:
        path, entry = row["path"], entry_of(row)
        via = scan_via(row) if path == "scan" else path
        if via == "csv":
            csv_rows.append((row["id"], row["patient_ref"], entry))
        elif via == "admin":
            results[row["id"]] = by_admin(admin_client, patients[row["patient_ref"]].pk, entry)
        elif via == "api":
            results[row["id"]] = by_api(client, row["patient_ref"], entry, secret)
        else:
            results[row["id"]] = by_fhir(client, row["patient_ref"], entry, secret)
    if csv_rows:
        results.update(by_csv(csv_rows))
    for row in rows:
        if row["path"] == "scan":
            results[row["id"]].via = scan_via(row)
    return results
