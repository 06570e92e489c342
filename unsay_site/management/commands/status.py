"""`manage.py status`: the same report as the staff page /status, for a terminal (its first line: the version)."""

import json

from django.core.management.base import BaseCommand, CommandError

from core.health import health_report


def _lines(value, prefix=""):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _lines(inner, f"{prefix}{key}.")
    elif isinstance(value, list):
        yield f"{prefix[:-1]}: {', '.join(map(str, value)) or '-'}"
    else:
        yield f"{prefix[:-1]}: {value}"


class Command(BaseCommand):
    help = "Print the version, engine, vector support, regions, Redis, Celery workers and table counts (as /status)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the JSON that /status returns")

    def handle(self, *args, as_json=False, **options):
        report = health_report()
        if as_json:
            self.stdout.write(json.dumps(report, indent=2, default=str))
        else:
            for line in _lines(report):
                self.stdout.write(line)
        if not report["ok"]:
            raise CommandError("database not reachable (see database.error above)")

