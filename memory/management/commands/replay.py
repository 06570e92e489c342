"""manage.py replay --key K --at TIMESTAMP | --subject S --at TIMESTAMP | --decision ID

Prints what we believed then by both routes (bitemporal, and MVCC time travel on CockroachDB)."""

from datetime import UTC

from django.core.management.base import CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.commands import MigratedCommand
from memory import replay


def _instant(text: str):
    at = parse_datetime(text)
    if at is None:
        raise CommandError(f"--at {text!r} is not a timestamp; use ISO 8601, e.g. 2026-11-29T15:00:00Z.")
    return at if timezone.is_aware(at) else timezone.make_aware(at, UTC)


class Command(MigratedCommand):
    help = "Replay beliefs about a fact key or subject at an instant, or a decision's read set."

    def add_arguments(self, parser):
        parser.add_argument("--key", help="fact_key to replay")
        parser.add_argument("--subject", help="subject (normalised drug name) to replay")
        parser.add_argument("--at", help="instant, ISO 8601 (naive means UTC)")
        parser.add_argument("--decision", type=int, help="decision id to replay")

    def handle(self, *args, key=None, subject=None, at=None, decision=None, **options):
        try:
            if decision is not None:
                if key or subject or at:
                    raise CommandError("--decision takes no --key/--subject/--at.")
                self.stdout.write(replay.format_replay_decision(replay.replay_decision_routes(decision)))
                return
            if not (key or subject) or not at:
                raise CommandError("Give --key K (or --subject S) with --at TIMESTAMP, or --decision ID.")
            self.stdout.write(replay.format_replay_at(replay.replay_at(_instant(at), fact_key=key, subject=subject)))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
