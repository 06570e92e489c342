"""The audit chain's head, written outside the database, so links deleted from the chain's end (with the
head rewound to match, which the chain alone cannot show) are found.

    anchor(path) -> (seq, link hash)      append the head now: `manage.py anchor_audit`, from cron
    anchor_failure(path) -> str           why the anchors disagree with the chain ("" when they agree)

The file is one line per anchor, `seq link-hash time`, only ever appended; keep it where database
administrators cannot change it (another host, a write-once bucket). Every anchored link must still be in
the chain with the anchored hash.
"""

import os
from pathlib import Path

from django.utils import timezone

from core.audit_chain import head
from core.models import AuditLink


def anchor(path: Path) -> tuple[int, str]:
    seq, link = head()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="ascii") as out:
        out.write(f"{seq} {link} {timezone.now().isoformat()}\n")
        out.flush()
        os.fsync(out.fileno())
    return seq, link


def anchor_failure(path: Path) -> str:
    if not path.exists():
        return ""
    anchored = []
    for number, line in enumerate(path.read_text(encoding="ascii").splitlines(), start=1):
        parts = line.split()
        if len(parts) != 3 or not parts[0].isdigit():
            return f"line {number} of the anchor file {path} is not `seq link-hash time`: {line[:80]!r}"
        anchored.append((int(parts[0]), parts[1], parts[2]))
    stored = dict(AuditLink.objects.filter(seq__in=[seq for seq, _, _ in anchored]).values_list("seq", "link_hash"))
    for seq, link, at in anchored:
        if seq and seq not in stored:
            return (f"link {seq}, anchored at {at}, is no longer in the chain: links were deleted from its end "
                    "(and the head rewound)")
        if seq and stored[seq] != link:
            return f"link {seq} is not the link anchored at {at}: the chain was rewritten up to it"
    return ""
