"""manage.py receive_epcis FILE --site S: receive one EPCIS document (1.2 XML, 2.0 XML or JSON / JSON-LD).

The file is read as a stream, never held whole in memory. A document is received in one transaction, so
its events are committed all at once: the progress bar (stderr; --no-progress hides it) shows the
document's events, stays at 0 while they are applied, and moves to the events settled (applied, already
received, or refused with a reason) only once the receipt has committed. A document refused as a whole
leaves it at 0: nothing was written.
"""

import json
import sys
from pathlib import Path

from django.core.management.base import CommandError
from tqdm import tqdm

from core.commands import MigratedCommand
from shelf.epcis import MAX_DOCUMENT_BYTES, DocumentError, open_document
from shelf.receiving import receive


def events_in(stream) -> int | None:
    """Counted by reading the document as a stream (nothing of it is kept)."""
    try:
        return sum(1 for _ in open_document(stream).events())
    except DocumentError:  # receive() refuses it with the reason
        return None


class Command(MigratedCommand):
    help = "Receive an EPCIS document at a site: units on hand, refused events listed with their reasons."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--site", required=True, help="The pharmacy site that received the goods.")
        parser.add_argument("--json", action="store_true", help="Print the receipt as JSON.")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args, file: Path, site: str, **options):
        try:
            size = file.stat().st_size
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from exc
        if size > MAX_DOCUMENT_BYTES:
            raise CommandError(f"{file} is {size:,} bytes; the limit is {MAX_DOCUMENT_BYTES:,}.")
        with file.open("rb") as stream, tqdm(
                total=None if options["no_progress"] else events_in(stream), unit="event",
                desc="receive_epcis (one transaction)", file=sys.stderr, disable=options["no_progress"],
                dynamic_ncols=True) as bar:
            receipt = receive(stream, site=site, source=file.name, actor="manage.py receive_epcis")
            if not receipt.error:  # committed
                settled = receipt.applied + receipt.skipped + receipt.refused_total
                bar.total = settled
                bar.update(settled)
        if options["json"]:
            self.stdout.write(json.dumps(receipt.as_dict(), indent=2))
        if receipt.error:
            raise CommandError(f"{file} refused: {receipt.error}")
        if not options["json"]:
            self.stdout.write(f"{file.name} at {site}: {receipt.applied} events applied, {receipt.skipped} already "
                              f"received, {receipt.refused_total} refused; {receipt.units_new} new units, "
                              f"{receipt.units_changed} changed.")
            for key, reason in receipt.refused[:50]:
                self.stdout.write(f"  refused {key[:60]}: {reason}")
