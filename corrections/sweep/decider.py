"""SharedDecider: ask.services.decide for a sweep, one result shared between decisions whose inputs are
identical (both paths of a page and the notices decide through it)."""

from ask import services as ask_services
from ask.beliefs import ROW_COLUMNS, DispensedRow
from patients.models import DispensingRecord


def question_key(question: str) -> str:
    return " ".join(question.lower().split())


def _keyed(row) -> tuple:
    return (row.drug, row.decision_inputs(), row.id, row.fingerprint)


class SharedDecider:
    """Calls ask.services.decide, sharing one result between decisions whose inputs are identical.

    The reasoner sees (question, subject, the patient's lots, NDCs, dispensing and expiry dates of that
    drug, the patient's drugs, the believed facts retrieved). Within one page the sweep reads a single
    snapshot (REPEATABLE READ), so the retrieval is a function of the first four; the key is exactly
    those four. (Anything the rules read from a dispensing row must be in the key: two patients who
    differ only in an expiry date can differ in verdict under a recall of every lot in a window.)
    """

    def __init__(self, reasoner=None):
        self.calls = 0  # reasoner runs (SweepRun.reasoner_calls)
        self.reasoner = reasoner  # None: the configured one (UNSAY_REASONER)
        self._cache: dict[tuple, object] = {}
        self._dispensed: dict[int, frozenset] = {}

    def reset(self):
        self._cache.clear()
        self._dispensed.clear()

    def preload(self, patient_ids):
        rows: dict[int, list] = {pid: [] for pid in patient_ids if pid not in self._dispensed}
        if not rows:
            return
        # The rows exactly as a decision reads them (ask.beliefs.DispensedRow): what they hold is the
        # inputs; ids and fingerprints are what the decision records.
        for pid, *values in DispensingRecord.objects.filter(patient_id__in=list(rows)).order_by("id").values_list(
                "patient_id", *ROW_COLUMNS):
            rows[pid].append(_keyed(DispensedRow(*values)))
        self._dispensed.update(rows)

    def preload_from(self, beliefs):
        """The same rows, from a ask.beliefs.PageBeliefs that has read them already."""
        for pid, records in beliefs.records.items():
            if pid not in self._dispensed:
                self._dispensed[pid] = [_keyed(r) for r, _product in records]

    def inputs_key(self, patient, question: str, subject: str) -> tuple:
        self.preload([patient.pk])
        dispensed = self._dispensed[patient.pk]
        drugs = frozenset(d for d, *_ in dispensed)
        contents = frozenset(inputs for d, inputs, _i, _f in dispensed if not subject or d == subject)
        return (question_key(question), subject or "", contents, drugs)

    def decide(self, patient, question: str, subject: str, *, beliefs=None, unshared=None):
        """(outcome, shared). `beliefs`: what decide() reads from (ask.beliefs; None: the database).
        `unshared`: what decides when no identical inputs were decided yet (default ask.services.decide;
        a set-based page hands in its grouped decider, corrections.sweep.groups.PageDecider)."""
        key = self.inputs_key(patient, question, subject)
        cached = self._cache.get(key)
        if cached is not None:
            # Same verdict and reads; the dispensing rows it rests on are this patient's own.
            rows = [(i, f) for d, _inputs, i, f in self._dispensed[patient.pk] if d == subject]
            return ask_services.rebind_inputs(cached, question, rows), True
        if unshared is not None:
            outcome = unshared(patient, question, subject)  # counts its own reasoner runs in self.calls
        else:
            self.calls += 1
            outcome = ask_services.decide(patient, question, subject=subject or None, reasoner=self.reasoner,
                                          beliefs=beliefs)
        self._cache[key] = outcome
        return outcome, False
