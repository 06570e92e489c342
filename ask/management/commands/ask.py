from django.core.management.base import CommandError

from ask.services import ask_each
from core.commands import MigratedCommand
from patients.models import Patient


class Command(MigratedCommand):
    help = 'Ask "is my medicine safe?" for a patient; prints the verdict, the answer and the read set.'

    def add_arguments(self, parser):
        parser.add_argument("question")
        parser.add_argument("--patient", required=True, help="The patient's external reference.")
        parser.add_argument("--subject", help="The medicine (normalised like dispensing drug names).")

    def handle(self, *args, question, patient, subject=None, **options):
        found = Patient.objects.filter(external_ref=patient).first()
        if found is None:
            raise CommandError(f"No patient with reference {patient!r}.")
        if not question.strip():
            raise CommandError("The question is empty.")
        decisions = ask_each(found, question, subject=subject)
        for number, decision in enumerate(decisions):
            if len(decisions) > 1:
                self.stdout.write(f"--- answer {number + 1} of {len(decisions)} ---")
            self._show(decision)

    def _show(self, decision):
        self.stdout.write(f"verdict:  {decision.verdict}")
        self.stdout.write(f"subject:  {decision.subject or '(unresolved)'}")
        self.stdout.write(f"reasoner: {decision.reasoner}")
        if decision.guardrail_override:
            self.stdout.write(f"guardrail raised {decision.reasoner_verdict!r}: {decision.guardrail_override}")
        self.stdout.write(f"answer:   {decision.answer}")
        self.stdout.write(f"decision: {decision.public_id}")
        reads = list(decision.reads.order_by("rank"))
        self.stdout.write(f"read set ({len(reads)}):")
        for read in reads:
            mark = "LOAD-BEARING" if read.load_bearing else "shown"
            self.stdout.write(f"  {read.rank:>2}. {read.fact_key} v{read.fact_version}  {mark:<12} "
                              f"score={read.score:.3f}")
