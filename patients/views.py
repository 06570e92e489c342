from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from patients.services import exposed_patients_for_recall


@require_GET
@login_required
@permission_required("patients.view_exposure", raise_exception=True)
def exposure(request):
    """Which patients a recall touches, and why (lot or drug match). Pharmacists only."""
    recall_number = request.GET.get("recall", "").strip().upper()
    exposures = exposed_patients_for_recall(recall_number) if recall_number else []
    return render(request, "patients/exposure.html", {
        "recall_number": recall_number,
        "exposures": exposures,
        "patient_count": len({e.patient.id for e in exposures}),
    })
