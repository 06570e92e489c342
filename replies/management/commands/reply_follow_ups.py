from django.conf import settings

from core.commands import MigratedCommand
from worklist.services import open_no_reply_tasks


class Command(MigratedCommand):
    help = "Open a follow-up task for every sent letter with no reply after UNSAY_REPLY_FOLLOW_UP_DAYS (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=None, help="Days after sending (default: the setting).")

    def handle(self, *args, days=None, **options):
        days = settings.UNSAY_REPLY_FOLLOW_UP_DAYS if days is None else days
        opened = open_no_reply_tasks(days=days)
        self.stdout.write(f"follow-up tasks opened: {opened} (no reply after {days} days)")
