"""Link audited events left outside the chain (their writer stopped between its commit and its seal), and
record a SEALED audit event naming each one, itself a link. `manage.py verify_audit` reports such events
as a failure and never seals them: look at them first (`--list`), since a row inserted by hand looks the
same to the database; sealing vouches for them from then on."""

from django.core.management.base import CommandError
from django.db import transaction

from core import audit_chain
from core.commands import MigratedCommand
from corrections import audit
from corrections.models import AuditEvent


class Command(MigratedCommand):
    help = "Seal audited events left outside the audit chain, recording who sealed which (see verify_audit)."

    def add_arguments(self, parser):
        parser.add_argument("--by", default="", help="Who checked the events and seals them (recorded).")
        parser.add_argument("--reason", default="", help="Why they are genuine (recorded).")
        parser.add_argument("--list", dest="list_only", action="store_true",
                            help="Only list the events outside the chain.")

    def handle(self, *args, by, reason, list_only, **options):
        events = audit_chain.unsealed()
        for event in events:
            self.stdout.write(f"{event._meta.db_table} row {event.pk}: {event}")
        if list_only or not events:
            self.stdout.write(f"{len(events)} event(s) outside the audit chain")
            return
        if not by.strip() or not reason.strip():
            raise CommandError("--by and --reason must name who checked the events and why they are genuine.")
        with transaction.atomic():
            sealed = audit_chain.seal_unsealed()
            audit.record(AuditEvent.Action.SEALED, by=by.strip(), after={"sealed": sealed}, note=reason.strip())
        self.stdout.write(f"sealed {sum(len(ids) for ids in sealed.values())} event(s); the seal is recorded")
