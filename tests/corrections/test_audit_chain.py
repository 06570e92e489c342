"""The corrections audit trail is tamper-evident: every event is a link of the one keyed chain
(core.audit_chain), sealed after its transaction commits by concurrent writers in one order;
`manage.py verify_audit` names the first link that an edit, a deletion or an insertion by hand broke and
never seals; `manage.py seal_audit` links what a dead writer left outside, and records that it did."""

import threading
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction

from core import audit_chain
from core.models import AuditChainHead, AuditLink
from corrections import audit
from corrections.models import AuditEvent

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
    links = list(AuditLink.objects.order_by("seq"))
    assert [(link.event_table, link.event_id) for link in links] == [("corrections_auditevent", e.pk) for e in events]
    assert "audit chain intact: 5 links verified" in _verify()
    head = AuditChainHead.objects.get()
    assert (head.seq, head.link_hash) == (5, links[-1].link_hash)


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
    with pytest.raises(CommandError, match=r"audit chain broken at link 3 \(corrections_auditevent row \d+\)"):
        _verify()


def test_events_of_a_transaction_are_linked_when_it_commits_and_not_if_it_rolls_back():
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


def test_an_event_left_unlinked_by_a_dead_writer_is_reported_and_sealed_only_by_the_audited_repair():
    _events(1)
    with transaction.atomic():  # as if its writer died after commit, before its seal
        orphan = audit.record(AuditEvent.Action.SENT, by="dispatcher")
        connection.run_on_commit.clear()
    _events(1)  # the next writer seals its own event, never the orphan
    assert AuditEvent.objects.get(pk=orphan.pk).seq is None
    with pytest.raises(CommandError, match=rf"corrections_auditevent row {orphan.pk}\): the event is not in the chain"):
        _verify()
    assert AuditEvent.objects.get(pk=orphan.pk).seq is None  # verifying sealed nothing
    out = StringIO()
    call_command("seal_audit", "--by", "ops", "--reason", "dispatcher killed at 03:12, message checked", stdout=out)
    assert "sealed 1 event(s)" in out.getvalue()
    assert AuditEvent.objects.get(pk=orphan.pk).seq == 3
    record = AuditEvent.objects.get(action=AuditEvent.Action.SEALED)
    assert (record.actor_label, record.seq) == ("ops", 4)
    assert record.after == {"sealed": {"corrections_auditevent": [orphan.pk]}}
    assert "4 links verified" in _verify()


def test_seal_audit_needs_who_and_why_and_lists_without_sealing():
    with transaction.atomic():
        audit.record(AuditEvent.Action.SENT, by="dispatcher")
        connection.run_on_commit.clear()
    out = StringIO()
    call_command("seal_audit", "--list", stdout=out)
    assert "1 event(s) outside the audit chain" in out.getvalue()
    with pytest.raises(CommandError, match="--by and --reason"):
        call_command("seal_audit", stdout=StringIO())
    assert AuditEvent.objects.get().seq is None


def test_deleting_the_newest_events_is_found_by_the_head():
    _events(4)
    AuditEvent.objects.filter(seq__gte=3).delete()
    AuditLink.objects.filter(seq__gte=3).delete()
    with pytest.raises(CommandError, match="links were deleted from its end"):
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
    assert audit_chain.head()[0] == per_thread * threads


def test_a_repair_that_seals_an_event_while_its_writer_seals_it_leaves_one_link(monkeypatch):
    """The writer reads its event, then the repair (another connection) links it before the writer takes the
    head: the writer's second link is refused by the database and its seal, retried, finds nothing to do."""
    real_head, raced = audit_chain._head, []

    def head_after_a_repair():
        if not raced:
            raced.append(True)
            repair = threading.Thread(target=lambda: (audit_chain.seal_unsealed(), connections.close_all()))
            repair.start()
            repair.join()
        return real_head()

    with transaction.atomic():
        event = audit.record(AuditEvent.Action.SENT, by="dispatcher")
        monkeypatch.setattr(audit_chain, "_head", head_after_a_repair)
    assert raced and AuditEvent.objects.get(pk=event.pk).seq == 1
    assert list(AuditLink.objects.values_list("event_id", flat=True)) == [event.pk]
    assert "audit chain intact: 1 links verified" in _verify()
