"""Re-resolve the drug identity and re-read the lot field of stored dispensing rows (drugs.identity,
drugs.lot_field), through save_dispensing.

Run after deploying the identity vocabulary, the lot-field reader or a new version of either. A row whose
identity key, identity source or NDC product changes, whose lot field now reads as another lot or other
lots it may mean, or whose lot is a placeholder ("NOT RECORDED", "SEE LABEL": recorded as 'lot unknown',
which makes it a candidate for every recall of some lots of its drug) is saved through
patients.dispensing.save_dispensing, so it gets an audit row (the text as it was is in its `before`) and
its patient's standing decisions about the drug are re-decided (dispensing_changed). Rows that do not
change are not written. --dry-run only counts.

The progress bar (stderr; --no-progress hides it) counts rows examined, and a row counts only once the
batch it belongs to has committed, so it shows work that a stop would keep, reads 100% only after the
last batch, and gives the rate and time left in rows.
"""

import sys
from collections import Counter

from django.db import transaction
from tqdm import tqdm

from core.commands import MigratedCommand
from drugs.identity import PRODUCT_SOURCE, UNRESOLVED
from drugs.lot_field import is_placeholder_lot, read_lot_field
from drugs.ndc import ndc_product
from patients.dispensing import save_dispensing
from patients.models import DispensingRecord, dispensing_identity

ACTOR = "command:resolve_dispensing"


def resolved_identity(row: DispensingRecord) -> tuple[str, str, str]:
    """(key, source, entered text) the row would get (patients.models.dispensing_identity, as save() derives it);
    the entered text is drug_text, else the old drug value (a normalised name from before identity
    keys), else the product description."""
    text = row.drug_text or row.drug or row.product_description
    key, source = dispensing_identity(text, row.product_description)
    return key, source, text


def lot_change(row: DispensingRecord) -> str:
    """"placeholder" when the row's lot says there is none, "re-read" when its lot field reads as another lot
    or other lots it may mean than those stored, "" when neither."""
    if row.lot_unknown:
        return ""
    entered = row.lot_text or row.lot
    if is_placeholder_lot(entered) or is_placeholder_lot(row.lot):
        return "placeholder"
    reading = read_lot_field(entered)
    return "re-read" if (reading.lot, reading.alternatives) != (row.lot, tuple(row.lot_alternatives)) else ""


class Command(MigratedCommand):
    help = "Re-resolve dispensing drug identities through save_dispensing (audit + re-decisions); --dry-run counts."

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Count what would change; write nothing.")
        parser.add_argument("--batch", type=int, default=500, help="Rows per transaction (default 500).")
        parser.add_argument("--no-progress", action="store_true", help="No live progress bar.")

    def handle(self, *args, dry_run: bool, batch: int, **options):
        counts: Counter = Counter()
        pending: list[DispensingRecord] = []
        rows = DispensingRecord.objects.select_related("patient").order_by("id")
        bar = tqdm(total=rows.count(), unit="row", desc="resolve_dispensing" + (" (dry run)" if dry_run else ""),
                   file=sys.stderr, disable=options["no_progress"], mininterval=0.2, dynamic_ncols=True)
        examined = 0  # rows examined since the bar last moved: they count once no earlier write is uncommitted
        for row in rows.iterator(chunk_size=2000):
            counts["rows"] += 1
            examined += 1
            key, source, text = resolved_identity(row)
            counts["unresolved" if source in (UNRESOLVED, PRODUCT_SOURCE) else "resolved"] += 1
            lot = lot_change(row)
            if lot:
                counts[lot] += 1
            if (key, source, ndc_product(row.ndc)) != (row.drug, row.drug_source, row.ndc_product) \
                    or not row.drug_text or lot:
                counts["changed"] += 1
                if not dry_run:
                    row.drug_text = text
                    if lot == "placeholder":
                        row.lot, row.lot_text, row.lot_unknown = "", "", True
                    pending.append(row)
            if len(pending) >= batch:
                self._save(pending)
                pending = []
            if not pending:
                bar.update(examined)
                examined = 0
        if pending:
            self._save(pending)
        if counts["rows"] != bar.total:  # rows added or deleted meanwhile: the bar ends at what was examined
            bar.total = counts["rows"]
        bar.update(examined)
        bar.close()
        verb = "would change" if dry_run else "changed"
        self.stdout.write(f"{counts['rows']} dispensing rows: {counts['changed']} {verb}; "
                          f"resolved {counts['rows'] - counts['unresolved']}, unresolved {counts['unresolved']} "
                          "(unresolved rows keep their product text as identity and are matched by NDC product "
                          "and lot, or by that text and the exact lot, until a person names the drug); "
                          f"lot field read anew {counts['re-read']}, placeholder lot recorded as unknown "
                          f"{counts['placeholder']}.")

    @staticmethod
    def _save(rows):
        with transaction.atomic():
            for row in rows:
                row.drug = ""  # resolve_identity() starts again from drug_text
                save_dispensing(row, actor=ACTOR)
