"""manage.py dispatch_outbox [--loop]: send approved messages; flag sends whose outcome is unknown."""

import signal
import time

from core.commands import MigratedCommand
from outbox.dispatch import dispatch_ready, flag_unknown_outcomes


class Command(MigratedCommand):
    help = "Send approved outbox messages once (or keep going with --loop); flag crashed sends for a human."

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true", help="Keep polling until SIGTERM.")
        parser.add_argument("--interval", type=float, default=5.0)
        parser.add_argument("--batch", type=int, default=50,
                            help="kept for scripts; ignored: messages are claimed one at a time")

    def handle(self, *args, loop, interval, batch, **options):
        self.shutdown = False
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "shutdown", True))
        while True:
            flagged = flag_unknown_outcomes()
            result = dispatch_ready(batch)
            self.stdout.write(f"{result.summary()}, flagged unknown {flagged}")
            if not loop or self.shutdown:
                return
            time.sleep(interval)
