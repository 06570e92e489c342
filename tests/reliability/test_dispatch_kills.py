"""Dispatcher crashes: a claim is one message (claims committed 50 at a time before sending once left
1,195 approved messages "unknown" after 42 SIGKILLs, 34 of them really sent, with nothing to requeue
them). SIGKILL the dispatcher (a real `manage.py dispatch_outbox` process, real database) again and
again mid-batch, and every approved message is sent exactly once or flagged, at most one flagged per
kill; a pharmacist's requeue then sends each flagged one exactly once, to the current contact."""

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib.auth.models import Group

from core.roles import PHARMACIST, sync_group_permissions
from corrections.models import AuditEvent, Correction, OutboxMessage
from outbox import dispatch
from patients.models import Patient
from tests.procs import PROJECT_DIR, subprocess_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# 10 in CI (each kill starts a Django process, ~3-15 s here); UNSAY_TEST_DISPATCH_KILLS=40 is the probe's 40.
KILLS = int(os.environ.get("UNSAY_TEST_DISPATCH_KILLS", "10"))
MESSAGES = 3 * KILLS + 30
SLOW_MAIL = "tests.reliability.slow_mail.SlowFileBackend"


@pytest.fixture
def pharmacist(django_user_model):
    sync_group_permissions(apps)
    user = django_user_model.objects.create_user("phil-reliability", password="pw")
    user.groups.add(Group.objects.get(name=PHARMACIST))
    return django_user_model.objects.get(pk=user.pk)


def approved_messages(count):
    """Approved corrections with ready outbox rows for synthetic patients (the sweep and review that
    make them are tested elsewhere; here only the dispatcher is under test)."""
    for i in range(count):
        patient = Patient.objects.create(region="aws-us-east-1", display_name=f"Synthetic DK{i:03d}",
                                         external_ref=f"SYN-DK{i:03d}", email=f"dk{i:03d}@example.com",
                                         preferred_channel="email", synthetic=True)
        key = f"{i:064x}"
        correction = Correction.objects.create(
            kind="correction", status=Correction.Status.APPROVED, patient=patient, match="asked",
            recall_number="D-0315-2019", new_verdict="stop", new_answer="synthetic", drafted_text="synthetic",
            dedupe_key=key)
        OutboxMessage.objects.create(correction=correction, channel="email", recipient=patient.email,
                                     subject="Recall update", body="synthetic", dedupe_key=key,
                                     status=OutboxMessage.Status.READY)


def sends(folder: Path) -> Counter:
    """Lines written per message. An empty file is a kill that landed between the backend opening the
    file and writing the message's line: nothing was sent, so it is not counted (it read as 0 sends)."""
    counts = Counter()
    for path in folder.glob("*.sent"):
        if lines := len(path.read_text().splitlines()):
            counts[path.stem] = lines
    return counts


def start_dispatcher(var_dir):
    env = subprocess_env(UNSAY_EMAIL_BACKEND=SLOW_MAIL, UNSAY_VAR_DIR=var_dir, SLOW_MAIL_SECONDS="0.05",
                         UNSAY_CELERY_EAGER="1")
    return subprocess.Popen([sys.executable, "manage.py", "dispatch_outbox"], cwd=PROJECT_DIR, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_sigkilled_dispatchers_strand_at_most_one_message_each_and_requeue_sends_them_once(tmp_path, pharmacist):
    approved_messages(MESSAGES)
    mail = tmp_path / "mail"
    rng = random.Random(16)
    kills = 0
    flagged_per_kill = []
    while kills < KILLS and OutboxMessage.objects.filter(status="ready").exists():
        before = sum(sends(mail).values())
        proc = start_dispatcher(str(tmp_path))
        deadline = time.monotonic() + 60
        while sum(sends(mail).values()) == before and proc.poll() is None:  # wait until it is sending
            assert time.monotonic() < deadline, "dispatcher never sent"
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.2))
        if proc.poll() is not None:
            assert proc.returncode == 0, proc.stderr.read()[-3000:]
            break  # it finished everything before we could kill it
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        kills += 1
        flagged_per_kill.append(dispatch.flag_unknown_outcomes(older_than_seconds=0))

    assert kills >= min(KILLS, 10), (f"only {kills} kills landed", flagged_per_kill, sends(mail),
                                     Counter(OutboxMessage.objects.values_list("status", flat=True)),
                                     Counter(OutboxMessage.objects.values_list("claimed_by", "attempts")))
    assert max(flagged_per_kill) <= 1, flagged_per_kill
    sent_files = sends(mail)
    assert set(sent_files.values()) <= {1}, "a message was sent twice"
    statuses = Counter(OutboxMessage.objects.values_list("status", flat=True))
    assert statuses["sending"] == 0
    for message in OutboxMessage.objects.filter(status="sent"):
        assert sent_files[message.dedupe_key] == 1  # recorded sent <=> really sent once
    unknown = list(OutboxMessage.objects.filter(status="unknown").values_list("pk", "dedupe_key"))
    assert len(unknown) <= kills

    # The rest goes out in one uninterrupted run.
    finish = start_dispatcher(str(tmp_path))
    assert finish.wait(120) == 0, finish.stderr.read()[-2000:]
    assert OutboxMessage.objects.filter(status="ready").count() == 0

    # A pharmacist requeues the flagged ones (one patient changed email meanwhile), a clean mail dir shows
    # exactly what the requeue sent.
    if unknown:
        moved = Correction.objects.get(message__pk=unknown[0][0]).patient
        moved.email = "new-address@example.com"
        moved.save()
    requeue_dir = tmp_path / "requeue"
    for message_id, _ in unknown:
        dispatch.requeue(message_id, user=pharmacist, note="checked with the provider: not delivered",
                         confirmed_not_delivered=True)
    again = start_dispatcher(str(requeue_dir))
    assert again.wait(120) == 0, again.stderr.read()[-2000:]
    resent = sends(requeue_dir / "mail")
    assert resent == Counter({key: 1 for _, key in unknown})
    if unknown:
        assert "new-address@example.com" in (requeue_dir / "mail" / f"{unknown[0][1]}.sent").read_text()
    assert Counter(OutboxMessage.objects.values_list("status", flat=True)) == Counter({"sent": MESSAGES})
    events = AuditEvent.objects.filter(action=AuditEvent.Action.REQUEUED)
    assert events.count() == len(unknown) and all(e.actor_id == pharmacist.pk for e in events)
    print(f"\n{kills} SIGKILLs, {MESSAGES} messages: {len(unknown)} flagged unknown "
          f"(max {max(flagged_per_kill)} per kill), {sum(1 for v in sent_files.values() if v)} sent before "
          f"the final run, 0 duplicates; requeue sent {len(resent)} once each")


def test_requeue_is_for_pharmacists_only_and_only_for_unknown_or_failed(pharmacist, django_user_model):
    from django.core.exceptions import PermissionDenied

    approved_messages(2)
    first, second = OutboxMessage.objects.order_by("pk")
    OutboxMessage.objects.filter(pk=first.pk).update(status="failed", attempts=5, last_error="no address")
    staff = django_user_model.objects.create_user("staff-only", is_staff=True)
    with pytest.raises(PermissionDenied):
        dispatch.requeue(first.pk, user=staff)
    with pytest.raises(dispatch.NotRequeueable, match="only unknown or failed"):
        dispatch.requeue(second.pk, user=pharmacist)  # ready: nothing to requeue
    requeued = dispatch.requeue(first.pk, user=pharmacist)
    assert (requeued.status, requeued.attempts, requeued.last_error) == ("ready", 0, "")
    event = AuditEvent.objects.get(action=AuditEvent.Action.REQUEUED)
    assert event.before["status"] == "failed" and event.after["status"] == "ready"


def test_the_outbox_admin_offers_requeue_to_pharmacists(client, pharmacist):
    approved_messages(1)
    message = OutboxMessage.objects.get()
    OutboxMessage.objects.filter(pk=message.pk).update(status="unknown")
    pharmacist.is_staff = True
    pharmacist.save()
    client.force_login(pharmacist)
    listing = client.get("/admin/corrections/outboxmessage/")
    assert listing.status_code == 200 and "requeue_selected" in listing.content.decode()
    # An unknown message may have been delivered: the action first asks for confirmation, changing nothing.
    asked = client.post("/admin/corrections/outboxmessage/",
                        {"action": "requeue_selected", "_selected_action": [message.pk]})
    assert asked.status_code == 200 and "may have received" in asked.content.decode()
    message.refresh_from_db()
    assert message.status == "unknown"
    response = client.post("/admin/corrections/outboxmessage/",
                           {"action": "requeue_selected", "_selected_action": [message.pk],
                            "confirm_not_delivered": "yes"}, follow=True)
    assert response.status_code == 200 and "Requeued 1 message" in response.content.decode()
    message.refresh_from_db()
    assert message.status == "ready"
    event = AuditEvent.objects.get(action=AuditEvent.Action.REQUEUED)
    assert event.after["confirmed_not_delivered_by"] == pharmacist.get_username() and event.actor_id == pharmacist.pk


def test_an_unknown_message_is_not_requeued_without_confirmation(pharmacist):
    approved_messages(1)
    message = OutboxMessage.objects.get()
    OutboxMessage.objects.filter(pk=message.pk).update(status="unknown")
    with pytest.raises(dispatch.ConfirmationNeeded, match="may have been delivered"):
        dispatch.requeue(message.pk, user=pharmacist)
    message.refresh_from_db()
    assert message.status == "unknown" and not AuditEvent.objects.filter(action=AuditEvent.Action.REQUEUED).exists()
