"""What recalls announces to the layers above it (they import recalls; recalls never imports them)."""

from django.dispatch import Signal

# Sent by the commands that write facts (ingest_recalls, escalate) when they finish, with
# `since` (when the command started). Each receiver returns one line for the command's output:
# corrections answers with what the sweeps those writes triggered did.
facts_written_report = Signal()


def report_lines(sender, since) -> list[str]:
    return [line for _, line in facts_written_report.send(sender=sender, since=since) if line]
