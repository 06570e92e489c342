from django.shortcuts import render

from core.roles import OPERATIONS_SCREEN, requires_permission
from memory.vectors import progress

from .models import IngestRun


# A permission, not the is_staff flag: a staff account with no group must not see runs and errors.
@requires_permission(OPERATIONS_SCREEN, "Operations are for pharmacy staff and pharmacists.")
def ops(request):
    """Running and recent ingest runs and the embedding backlog; both refresh themselves through htmx polling."""
    runs = IngestRun.objects.all()[:25]
    embedding = progress()
    running = any(run.status == IngestRun.Status.RUNNING for run in runs) or embedding.without_vector > 0
    context = {"runs": runs, "running": running, "embedding": embedding}
    if request.htmx:
        return render(request, "recalls/_ingest_runs.html", context)
    return render(request, "recalls/ops.html", context)
