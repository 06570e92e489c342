"""Write the API v1 OpenAPI document to docs/openapi.json (or --output); --check fails if it differs."""

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from api.views import openapi_document

DEFAULT = Path(settings.BASE_DIR) / "docs" / "openapi.json"


def rendered() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class Command(BaseCommand):
    help = "Write the API v1 OpenAPI document (docs/openapi.json); --check exits 1 if the file is out of date."

    def add_arguments(self, parser):
        parser.add_argument("--output", type=Path, default=DEFAULT)
        parser.add_argument("--check", action="store_true", help="Compare instead of writing.")

    def handle(self, *args, output: Path, check: bool, **options):
        text = rendered()
        if check:
            if not output.exists() or output.read_text() != text:
                raise CommandError(f"{output} is out of date; run `manage.py export_openapi`.")
            self.stdout.write(f"{output} is up to date.")
            return
        output.write_text(text)
        self.stdout.write(f"Wrote {output} ({len(text)} bytes).")
