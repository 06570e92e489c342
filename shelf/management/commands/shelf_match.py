"""manage.py shelf_match [--recall D-0502-2019]: match the believed recall facts against the shelf again.

Matching normally runs when a recall fact changes (a Celery task shelf.tasks queues on
memory.signals.facts_changed) and when units are received; this re-runs it, e.g. after a failure was
logged or while no worker ran. Linking is idempotent: nothing is linked twice.
"""


from core.commands import MigratedCommand
from drugs import recall_terms
from memory.models import Fact
from shelf.quarantine import match_facts


class Command(MigratedCommand):
    help = "Match believed recall facts against the units on the shelf (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--recall", help="Only this recall number.")

    def handle(self, *args, recall=None, **options):
        facts = Fact.objects.believed().filter(kind=Fact.Kind.RECALL)
        if recall:
            facts = facts.filter(fact_key__startswith=recall_terms.key_prefix(recall))
        ids = list(facts.values_list("id", flat=True))
        tasks = []
        for i in range(0, len(ids), 500):
            tasks.extend(match_facts(ids[i:i + 500]))
        self.stdout.write(f"{len(ids)} recall facts matched; {len({t.pk for t in tasks})} shelf tasks touched.")
