"""Append the audit chain's head to the anchor file (UNSAY_AUDIT_ANCHOR_FILE), from cron: `verify_audit`
then finds links deleted from the chain's end (core.audit_anchor)."""

from django.conf import settings
from django.core.management.base import CommandError

from core.audit_anchor import anchor
from core.commands import MigratedCommand


class Command(MigratedCommand):
    help = "Append the audit chain's head (seq and link hash) to UNSAY_AUDIT_ANCHOR_FILE."

    def handle(self, *args, **options):
        if not settings.UNSAY_AUDIT_ANCHOR_FILE:
            raise CommandError("UNSAY_AUDIT_ANCHOR_FILE is not set: name a file outside the database's reach.")
        seq, link = anchor(settings.UNSAY_AUDIT_ANCHOR_FILE)
        self.stdout.write(f"anchored link {seq} ({link[:16]}…) in {settings.UNSAY_AUDIT_ANCHOR_FILE}")
