"""manage.py demo_story: the story `make demo` tells (after ingest_recalls --demo and seed_demo).

The demo patients ask in four phrasings, the real recall of their lot (demo/patients.py) is escalated
to Class I — FDA classifies a recall, so every lot fact of it gets a new version — the sweep
re-decides what that escalation made stale (the exposed patients' answers move and are corrected;
the neighbours on other valsartan lots rest on no fact of this recall and are left alone), and the
pharmacist is pointed at the queue.
Running it again asks nothing twice, escalates nothing twice and drafts nothing twice.
"""

from django.core.management.base import CommandError

from ask.services import ask
from core.commands import MigratedCommand
from corrections.models import Correction, SweepRun
from corrections.sweep.run import sweep
from corrections.triggers import auto_sweep_suppressed
from demo.escalation import escalate
from demo.patients import DEMO_LOT, DEMO_PATIENT_REFS, DEMO_RECALL_NUMBER
from memory.models import Decision
from patients.models import Patient

PHRASINGS = [
    "Is my valsartan safe?",
    "Should I keep taking my blood pressure pills?",
    "Has my valsartan been recalled?",
    "Is there anything wrong with the tablets the pharmacy gave me?",
]


class Command(MigratedCommand):
    help = "Demo: patients ask, the demo lot is escalated to Class I, the sweep drafts corrections for review."

    def handle(self, *args, **options):
        patients = list(Patient.objects.filter(external_ref__in=DEMO_PATIENT_REFS).order_by("external_ref"))
        if not patients:
            raise CommandError("No demo patients: run `manage.py seed_demo` first.")
        asked = 0
        for index, patient in enumerate(patients):
            question = PHRASINGS[index % len(PHRASINGS)]
            if Decision.objects.filter(patient_id=patient.pk, question=question).exists():
                continue  # asked on an earlier run; its answer (or its re-decision) is on record
            decision = ask(patient, question)
            asked += 1
            # An id, not the name or reference: command output ends up in logs and CI transcripts.
            self.stdout.write(f"  patient #{patient.pk}: “{question}” -> {decision.verdict}")
        self.stdout.write(f"{asked} question(s) asked ({len(patients) - asked} already on record).")

        with auto_sweep_suppressed():  # we sweep right here, in the foreground, to print the counts
            try:
                results = escalate(DEMO_RECALL_NUMBER, "Class I", by="demo_story")
            except LookupError as exc:
                raise CommandError(f"{exc} (run `manage.py ingest_recalls --demo` first)") from exc
        for r in results:
            if r.fact_key.endswith(f":lot:{DEMO_LOT}") or len(results) <= 3:
                state = "already Class I" if r.status == "unchanged" else f"{r.old_classification} -> Class I"
                self.stdout.write(f"Escalated {r.fact_key} (the demo patients' lot): {state}")
        self.stdout.write(f"Escalated {DEMO_RECALL_NUMBER} to Class I: {len(results)} lot fact(s) of the recall.")

        # The sweep the escalation would set off in production (corrections.triggers): the changed facts'
        # old and new versions, not every recall on file. Nothing changed (a second run): everything, so
        # a run stopped before its sweep finished is finished now.
        changed = sorted({i for r in results if r.status != "unchanged" for i in (r.old_fact_id, r.new_fact_id)})
        report = sweep(fact_ids=changed or None, trigger=SweepRun.Trigger.MANUAL)
        waiting = Correction.objects.pending_review().filter(recall_number=DEMO_RECALL_NUMBER).count()
        self.stdout.write(self.style.SUCCESS(
            f"Sweep: examined {report.examined}, corrected {report.corrected}, reaffirmed {report.reaffirmed}, "
            f"notices drafted {report.notices}, reasoner calls {report.reasoner_calls}."))
        self.stdout.write(f"{waiting} draft(s) for {DEMO_RECALL_NUMBER} await review: log in as `pharmacist` "
                          "and open /corrections/review/ (dashboard: /corrections/dashboard/).")
