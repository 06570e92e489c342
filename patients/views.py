from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.roles import EXPOSURE_SCREEN, requires_permission
from patients.services import exposed_patients_for_recall


@require_GET
@requires_permission(EXPOSURE_SCREEN, "Only pharmacists may see which patients a recall touches.")
def exposure(request):
    """Which patients a recall touches, and why (lot or drug match). Pharmacists only."""
    recall_number = request.GET.get("recall", "").strip().upper()
    exposures = exposed_patients_for_recall(recall_number) if recall_number else []
    return render(request, "patients/exposure.html", {
        "recall_number": recall_number,
        "exposures": exposures,
        "patient_count": len({e.patient.id for e in exposures}),
    })
