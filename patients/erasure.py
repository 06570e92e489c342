"""A patient's identifying data on the patient row, erased on request (privacy.services.erase_patient).

Name, contact details and the pharmacy's own id are replaced; the region (where the row lives), the
synthetic flag and the dispensing rows (drug, NDC, lot, dates: what recall work counts) stay, tied to a
patient no one can name. An erased patient is recognised by the reference the erasure gives them (derived
from their public id, so no reference a pharmacy enters can take that form by chance): no API key may be
issued for them, and a key they held is refused (privacy.keys)."""

from .models import Patient

ERASED_NAME = "Erased patient"


def erased_reference(patient: Patient) -> str:
    return f"ERASED-{patient.public_id.hex[:12]}"


def is_erased(patient: Patient) -> bool:
    return patient.external_ref == erased_reference(patient)


def redact_patient(patient: Patient) -> dict[str, int]:
    changed = Patient.objects.filter(pk=patient.pk).update(
        display_name=ERASED_NAME, email="", phone="", external_ref=erased_reference(patient),
        preferred_channel=Patient.Channel.EMAIL)
    return {"patients": changed}
