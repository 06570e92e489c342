from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import render

from .models import IngestRun


def _can_see_operations(user) -> bool:
    # A permission, not the is_staff flag: a staff account with no group must not see runs and errors.
    return user.has_perm("recalls.view_ingestrun")

@login_required
def ops(request):
    """Running and recent ingest runs; the runs table refreshes itself through htmx polling."""
    if not _can_see_operations(request.user):
        raise PermissionDenied("Operations are for pharmacy staff and pharmacists.")
    runs = IngestRun.objects.all()[:25]
    running = any(run.status == IngestRun.Status.RUNNING for run in runs)
    context = {"runs": runs, "running": running}
    if request.htmx:
        return render(request, "recalls/_ingest_runs.html", context)
    return render(request, "recalls/ops.html", context)
