from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .health import cached_report, liveness


@require_GET
@never_cache
def health(request):
    """Public liveness: up or down only, from a cached, bounded check (see unsay_site.health)."""
    answer = liveness()
    return JsonResponse({"status": answer["status"]}, status=200 if answer["ok"] else 503)


@require_GET
@never_cache
@staff_member_required
def status(request):
    """The full report (versions, regions, Redis, workers, counts, model usage), for staff only."""
    report = cached_report()
    return JsonResponse(report, status=200 if report["ok"] else 503)


@login_required
def home(request):
    return render(request, "home.html")
