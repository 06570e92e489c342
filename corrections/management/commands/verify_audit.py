"""Recompute the audit chain (core.audit_verify) and name the first failure: the link, the table and row,
and what failed. Exit status 1 when the chain is broken or an event is outside it, so a cron job or a
monitor can alert on it. Reads only: it never seals (`manage.py seal_audit` does, and records it)."""

from django.core.management.base import CommandError

from core.audit_verify import verify_chain
from core.commands import MigratedCommand


class Command(MigratedCommand):
    help = ("Verify the tamper-evident audit chain of every audited table: each link with its key, each "
            "event's content, and that no event is outside the chain. Writes nothing.")

    def handle(self, *args, **options):
        result = verify_chain()
        if not result.ok:
            raise CommandError(f"audit chain broken at {result.describe()} ({result.links} links verified "
                               f"before it; {result.unsealed} event(s) outside the chain)")
        self.stdout.write(f"audit chain intact: {result.links} links verified")
