"""manage.py receive_epcis FILE --site S: receive one EPCIS document (1.2 XML, 2.0 XML or JSON / JSON-LD)."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from shelf.epcis import MAX_DOCUMENT_BYTES
from shelf.receiving import receive


class Command(BaseCommand):
    help = "Receive an EPCIS document at a site: units on hand, refused events listed with their reasons."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--site", required=True, help="The pharmacy site that received the goods.")
        parser.add_argument("--json", action="store_true", help="Print the receipt as JSON.")

    def handle(self, *args, file: Path, site: str, **options):
        try:
            size = file.stat().st_size
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from exc
        if size > MAX_DOCUMENT_BYTES:
            raise CommandError(f"{file} is {size:,} bytes; the limit is {MAX_DOCUMENT_BYTES:,}.")
        receipt = receive(file.read_bytes(), site=site, source=file.name, actor="manage.py receive_epcis")
        if options["json"]:
            self.stdout.write(json.dumps(receipt.as_dict(), indent=2))
        if receipt.error:
            raise CommandError(f"{file} refused: {receipt.error}")
        if not options["json"]:
            self.stdout.write(f"{file.name} at {site}: {receipt.applied} events applied, {receipt.skipped} already "
                              f"received, {len(receipt.refused)} refused; {receipt.units_new} new units, "
                              f"{receipt.units_changed} changed.")
            for key, reason in receipt.refused[:50]:
                self.stdout.write(f"  refused {key[:60]}: {reason}")
