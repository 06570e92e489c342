"""What /health and `manage.py status` report. One function so both always agree."""

from django.conf import settings
from django.db import connection


def health_report() -> dict:
    report = {"database": {"ok": False}, "redis": {"ok": False}, "celery": {"workers": []}, "counts": {}}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT version()")
            version = cursor.fetchone()[0]
        report["database"] = {"ok": True, "engine": connection.vendor, "version": version,
                              "embedded": settings.EMBEDDED_DATABASE}
    except Exception as exc:  # report, don't crash: this is what operators look at when things are broken
        report["database"]["error"] = str(exc)
    return report
