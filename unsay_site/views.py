from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .health import health_report


@require_GET
def health(request):
    report = health_report()
    return JsonResponse(report, status=200 if report["ok"] else 503)


@login_required
def home(request):
    return render(request, "home.html")
