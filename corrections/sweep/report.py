"""What a sweep did: its report (SweepReport, returned by corrections.sweep.run.sweep and printed by
`manage.py sweep`) and the running totals on its SweepRun row (save_run_progress, after each page)."""

from dataclasses import dataclass, field

from django.db.models import F
from django.utils import timezone

from ..models import SweepRun

# The counts SweepRun keeps too (set_pages is the report's only).
_RUN_COUNTS = ("examined", "reaffirmed", "corrected", "notices", "already_handled", "reasoner_calls", "errors", "pages")


def reference_of(patient) -> str | None:
    """How a dry run's preview names a decision's patient: the pharmacy's reference, never the name."""
    return patient.external_ref if patient is not None else None


@dataclass
class SweepReport:
    examined: int = 0
    reaffirmed: int = 0
    corrected: int = 0
    notices: int = 0
    already_handled: int = 0
    reasoner_calls: int = 0
    errors: int = 0
    pages: int = 0
    set_pages: int = 0  # pages written by the set-based path (corrections.sweep.pages); not on the run row
    error_text: list[str] = field(default_factory=list)
    # dry run: what would change, each patient by reference only (`manage.py sweep --dry-run` prints it)
    preview: list[dict] = field(default_factory=list)
    run: SweepRun | None = None

    def add(self, other: "SweepReport"):
        for name in (*_RUN_COUNTS, "set_pages"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.error_text.extend(other.error_text)
        self.preview.extend(other.preview)

    def summary(self) -> str:
        return (f"examined {self.examined}, reaffirmed {self.reaffirmed}, corrected {self.corrected}, "
                f"notices drafted {self.notices}, already handled {self.already_handled}, "
                f"reasoner calls {self.reasoner_calls}, errors {self.errors}")


def save_run_progress(run: SweepRun, delta: SweepReport, *, last_id: int | None = None):
    """Add `delta` to the run's counts in one UPDATE, with a fresh heartbeat; `last_id`: the last
    decision id of the page just written."""
    values = {name: F(name) + getattr(delta, name) for name in _RUN_COUNTS}
    values["heartbeat"] = timezone.now()
    if last_id is not None:
        values["last_decision_id"] = last_id
    if delta.error_text:
        run.error_text = (run.error_text + "\n" + "\n".join(delta.error_text)).strip()[-10000:]
        values["error_text"] = run.error_text
    SweepRun.objects.filter(pk=run.pk).update(**values)
