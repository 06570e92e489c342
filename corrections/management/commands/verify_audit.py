"""Recompute the audit chain (corrections.audit) and name the first broken link. Exit status 1 when the
chain is broken, so a cron job or a monitor can alert on it. Reads only."""

from django.core.management.base import CommandError

from core.commands import MigratedCommand
from corrections.audit import verify_chain


class Command(MigratedCommand):
    help = "Verify the tamper-evident audit chain: every event's content hash and every link, in order."

    def handle(self, *args, **options):
        result = verify_chain()
        if not result.ok:
            raise CommandError(f"audit chain broken at link {result.first_broken_seq}: {result.reason} "
                               f"({result.events} links checked before it)")
        unsealed = f"; {result.unsealed} event(s) not in the chain" if result.unsealed else ""
        self.stdout.write(f"audit chain intact: {result.events} links verified{unsealed}")
