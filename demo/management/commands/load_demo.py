"""`manage.py load_demo`: load the demo data, one step per app, each only once its command exists."""

from django.core.management import call_command, get_commands
from django.db import connection

from core.commands import MigratedCommand
from demo.slice import DEMO_SLICE

# In order: recalls and labels first (ingestion), then synthetic patients who were dispensed the
# recalled lots, then the story (ask, escalate a recall, sweep, print counts), then a letter answered.
STEPS = [
    # The story asks questions at once: their retrieval reads the facts with their vectors, as before.
    ("ingest_recalls", ["--file", str(DEMO_SLICE), "--wait-embeddings"]),
    ("seed_demo", []),
    ("demo_story", []),
    ("demo_reply", []),  # two letters sent, a patient's reply recorded through its link
]


class Command(MigratedCommand):
    help = "Load the demo data: " + ", then ".join(" ".join([name, *args]) for name, args in STEPS) + "."

    def handle(self, *args, **options):
        available = get_commands()
        for name, step_args in STEPS:
            if name not in available:
                self.stdout.write(f"skipped: {name} not available yet")
                continue
            self.stdout.write(self.style.MIGRATE_HEADING(f"== {' '.join([name, *step_args])}"))
            call_command(name, *step_args, stdout=self.stdout, stderr=self.stderr)
            if name in ANALYZE_AFTER:
                analyze()


# The planner's statistics as soon as the data they describe is in, not when autovacuum next wakes: on a
# fresh database every table looks empty to the planner until then. The story's sweep read the stale set
# by a plan for empty tables (4 s instead of 30 ms on the demo data), and the public /check's lookup of a
# product's recalls (a GIN index on scopes) is planned as a scan of every believed fact (bench/check_pack.py).
ANALYZE_AFTER = {"seed_demo", "demo_reply"}


def analyze():
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
