from core.commands import MigratedCommand
from demo.patients import DEMO_DRUG, DEMO_LOT, DEMO_RECALL_NUMBER, seed_demo


class Command(MigratedCommand):
    help = "Create the demo scenario: 12 synthetic patients dispensed one real recalled lot, plus neighbours."

    def handle(self, *args, **options):
        summary = seed_demo()
        self.stdout.write(self.style.SUCCESS(
            f"Demo patients: {summary['patients']} ({summary['dispensings_created']} dispensing rows created) "
            f"in {', '.join(summary['regions'])}; recall {DEMO_RECALL_NUMBER}, {DEMO_DRUG} lot {DEMO_LOT}."
        ))
