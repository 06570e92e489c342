"""The audit trail is tamper-evident: every event is a link of one hash chain, appended in the state
change's own transaction by concurrent writers in one order; `manage.py verify_audit` names the first
link that an edit, a deletion or an insertion by hand broke."""

import threading
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections

from corrections import audit
from corrections.models import AuditChainHead, AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)


def _events(n, *, note="checked"):
    """n events, each written in its own transaction (autocommit) and so sealed when it commits."""
    events = [audit.record(AuditEvent.Action.APPROVED, by="test", before={"status": "draft", "i": i},
                           after={"status": "approved"}, note=f"{note} {i}") for i in range(n)]
    for event in events:
        event.refresh_from_db()
    return events


def _verify() -> str:
    out = StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


def test_an_intact_chain_verifies_and_links_follow_one_another():
    events = _events(5)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert events[1].link_hash == audit.link_hash(events[0].link_hash, 2, events[1].content_hash)
    assert "audit chain intact: 5 links verified" in _verify()
    head = AuditChainHead.objects.get()
    assert (head.seq, head.link_hash) == (5, events[-1].link_hash)


@pytest.mark.parametrize("tamper", [
    "UPDATE corrections_auditevent SET note = 'nothing to see' WHERE seq = 3",
    "UPDATE corrections_auditevent SET after = '{\"status\": \"rejected\"}' WHERE seq = 3",
    "UPDATE corrections_auditevent SET actor_label = 'someone else' WHERE seq = 3",
    "DELETE FROM corrections_auditevent WHERE seq = 3",
])
def test_an_edit_or_deletion_by_raw_sql_is_found_at_its_link(tamper):
    _events(5)
    with connection.cursor() as cursor:
        cursor.execute(tamper)
    with pytest.raises(CommandError, match="audit chain broken at link 3"):
        _verify()


def test_a_rewritten_event_with_recomputed_hashes_still_breaks_the_next_link():
    events = _events(4)
    forged = AuditEvent.objects.get(seq=2)
    forged.note = "forged"
    forged.content_hash = audit.event_content_hash(forged)
    forged.link_hash = audit.link_hash(events[0].link_hash, 2, forged.content_hash)
    AuditEvent.objects.filter(pk=forged.pk).update(note=forged.note, content_hash=forged.content_hash,
                                                   link_hash=forged.link_hash)
    with pytest.raises(CommandError, match="audit chain broken at link 3"):
        _verify()


def test_events_of_a_transaction_are_linked_when_it_commits_and_not_if_it_rolls_back():
    from django.db import transaction

    _events(2)
    with transaction.atomic():
        inside = audit.record(AuditEvent.Action.REJECTED, by="test", note="in a transaction")
        assert AuditEvent.objects.get(pk=inside.pk).seq is None  # linked after commit, never before
    assert AuditEvent.objects.get(pk=inside.pk).seq == 3
    with pytest.raises(RuntimeError), transaction.atomic():
        audit.record(AuditEvent.Action.REJECTED, by="test", note="rolled back")
        raise RuntimeError("the state change failed")
    assert "audit chain intact: 3 links verified" in _verify()
    assert AuditChainHead.objects.get().seq == 3


def test_an_event_left_unlinked_by_a_dead_writer_is_linked_by_the_next_seal():
    _events(1)
    orphan = AuditEvent.objects.create(actor_label="test", action=AuditEvent.Action.SENT,
                                       content_hash="")  # as if its writer died after commit
    orphan.content_hash = audit.event_content_hash(orphan)
    AuditEvent.objects.filter(pk=orphan.pk).update(content_hash=orphan.content_hash)
    assert AuditEvent.objects.get(pk=orphan.pk).seq is None
    _events(1)  # the next writer's seal links the orphan first, then its own event
    assert list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2, 3]
    assert AuditEvent.objects.get(pk=orphan.pk).seq == 2
    assert "3 links verified" in _verify()


def test_deleting_the_newest_events_is_found_by_the_head():
    _events(4)
    AuditEvent.objects.filter(seq__gte=3).delete()
    with pytest.raises(CommandError, match="events were deleted from its end"):
        _verify()


def test_concurrent_writers_append_one_gapless_chain():
    """Eight threads, each with its own connection, append events at once: no link is lost or doubled."""
    per_thread, threads, errors = 15, 8, []

    def write():
        try:
            _events(per_thread, note=threading.current_thread().name)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=write, name=f"w{i}") for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    seqs = sorted(AuditEvent.objects.values_list("seq", flat=True))
    assert seqs == list(range(1, per_thread * threads + 1))
    assert f"{per_thread * threads} links verified" in _verify()
