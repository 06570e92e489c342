"""FHIR R4 MedicationDispense -> the fields of a dispensing record.

Validated with fhir.resources (its R4B models: MedicationDispense and Medication are unchanged
from R4). The lot is not on MedicationDispense: it is Medication.batch.lotNumber, so the
medication must be a contained Medication referenced as "#id". The patient is
subject.reference "Patient/<external_ref>" or subject.identifier.value.
"""

from datetime import datetime

import pydantic
from fhir.resources.R4B.medicationdispense import MedicationDispense

from api import problems
from api.schemas import parse_instant

NDC_SYSTEM = "http://hl7.org/fhir/sid/ndc"


def _errors(exc: pydantic.ValidationError) -> list[dict]:
    return [{"field": ".".join(str(p) for p in e["loc"]) or "MedicationDispense", "message": e["msg"]}
            for e in exc.errors(include_url=False, include_input=False)[:20]]


def _patient_ref(dispense) -> str | None:
    subject = dispense.subject
    if subject is None:
        return None
    if subject.reference:
        kind, _, ref = subject.reference.partition("/")
        if kind != "Patient" or not ref:
            raise problems.invalid('subject.reference must be "Patient/<external reference>".')
        return ref
    return subject.identifier.value if subject.identifier else None


def _medication(dispense):
    reference = dispense.medicationReference.reference if dispense.medicationReference else None
    if not reference or not reference.startswith("#"):
        raise problems.invalid("medicationReference must point at a contained Medication (\"#id\"): "
                               "the lot is Medication.batch.lotNumber.")
    for resource in dispense.contained or []:
        if resource.get_resource_type() == "Medication" and resource.id == reference[1:]:
            return resource
    raise problems.invalid(f"No contained Medication with id {reference[1:]!r}.")


def _day(value):
    return value.date() if isinstance(value, datetime) else value


def dispensing_fields(document: dict) -> dict:
    """The DispensingIn fields of a MedicationDispense document; problems.invalid if it is not one."""
    if document.get("resourceType") != "MedicationDispense":
        raise problems.invalid('resourceType must be "MedicationDispense".')
    try:
        dispense = MedicationDispense.model_validate(document)
    except pydantic.ValidationError as exc:
        raise problems.invalid("Not a valid FHIR R4 MedicationDispense.", errors=_errors(exc)) from None
    if dispense.status != "completed":
        raise problems.invalid('Only a completed dispense (status "completed") is a dispensing record.')
    medication = _medication(dispense)
    batch = medication.batch
    codings = (medication.code.coding or []) if medication.code else []
    ndc = next((c.code for c in codings if c.system == NDC_SYSTEM and c.code), "")
    # The product as dispensed: code.text, else a coding's display (many systems send only that).
    product = ((medication.code.text if medication.code else "") or
               next((c.display for c in codings if c.display), "") or "")
    quantity = dispense.quantity.value if dispense.quantity else None
    try:  # the instant as sent: FHIR also allows a bare date or year, which is no instant
        dispensed_at = parse_instant(document.get("whenHandedOver"))
    except ValueError as exc:
        raise problems.invalid("whenHandedOver is not a date-time with a zone.",
                               errors=[{"field": "whenHandedOver", "message": str(exc)}]) from None
    return {
        "patient": _patient_ref(dispense),
        "drug": "",
        "product_description": product,
        "ndc": ndc,
        "lot": (batch.lotNumber or "") if batch else "",
        "expiry": _day(batch.expirationDate) if batch else None,
        "quantity": int(quantity) if quantity is not None and quantity == int(quantity) else quantity,
        "dispensed_at": dispensed_at,
        "site": "",
    }
