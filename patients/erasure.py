"""A patient's identifying data on the patient row, erased on request (privacy.services.erase_patient).

Name, contact details and the pharmacy's own id are replaced; the region (where the row lives), the
synthetic flag and the dispensing rows (drug, NDC, lot, dates: what recall work counts) stay, tied to a
patient no one can name."""

from .models import Patient

ERASED_NAME = "Erased patient"


def redact_patient(patient: Patient) -> dict[str, int]:
    reference = f"ERASED-{patient.public_id.hex[:12]}"
    changed = Patient.objects.filter(pk=patient.pk).update(
        display_name=ERASED_NAME, email="", phone="", external_ref=reference,
        preferred_channel=Patient.Channel.EMAIL)
    return {"patients": changed}
