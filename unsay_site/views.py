import hmac

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseForbidden, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from django_prometheus.exports import ExportToDjangoView

from core.health import cached_report, liveness


@require_GET
@never_cache
def health(request):
    """Public liveness: up or down only, from a cached, bounded check (see core.health)."""
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


@never_cache
@require_GET
def metrics(request):
    """Prometheus metrics (unsay_site.metrics): for staff, for a scraper presenting
    `Authorization: Bearer <UNSAY_METRICS_TOKEN>`, or for anyone when UNSAY_METRICS_PUBLIC is on (a
    private scrape network). Labels carry no patient data, but volumes are operational detail."""
    token = settings.UNSAY_METRICS_TOKEN
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    allowed = (settings.UNSAY_METRICS_PUBLIC or request.user.is_staff
               or bool(token and given and hmac.compare_digest(given.encode(), token.encode())))
    if not allowed:
        return HttpResponseForbidden("metrics: staff login or the metrics token required\n")
    return ExportToDjangoView(request)
