"""Outbox dispatch: only approved messages leave, once; email Message-ID is the dedupe key; SMS via
SNS (botocore Stubber); transient failures back off; unknown outcomes are flagged, not resent."""

import smtplib
from datetime import timedelta

import boto3
import pytest
from botocore.stub import Stubber
from django.core import mail
from django.utils import timezone

from corrections.models import AuditEvent, Correction, OutboxMessage
from corrections.review import approve, reject
from outbox import dispatch

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


@pytest.fixture(autouse=True)
def locmem_email(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


@pytest.fixture
def sns(settings):
    settings.UNSAY_SNS_ENABLED = True
    client = boto3.client("sns", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
    with Stubber(client) as stubber:
        yield client, stubber


def test_only_approved_messages_leave_and_email_carries_the_dedupe_key(people, drafts):
    a, b = drafts["SYN-A"], drafts["SYN-B"]
    approve(a.pk, user=people["pharmacist"])
    reject(b.pk, user=people["pharmacist"], reason="spoke to the patient by phone")

    result = dispatch.dispatch_ready()

    assert (result.claimed, result.sent) == (1, 1)
    [email] = mail.outbox
    assert email.to == ["syn-a@example.com"] and email.extra_headers["Message-ID"] == f"<{a.dedupe_key}@unsay.local>"
    assert "Call us before your next dose" in email.body
    a.refresh_from_db()
    assert a.status == Correction.Status.SENT
    assert a.message.status == "sent" and a.message.attempts == 1 and a.message.sent_at is not None
    assert a.message.provider_id == a.message.message_id
    assert a.audit_events.filter(action=AuditEvent.Action.SENT).count() == 1
    # Nothing else is due: held (SYN-D) and cancelled (SYN-B) rows are never claimed.
    assert dispatch.dispatch_ready().claimed == 0
    assert len(mail.outbox) == 1


def test_sms_goes_through_sns(people, drafts, sns):
    client, stubber = sns
    notice = drafts["SYN-D"]  # prefers SMS
    approve(notice.pk, user=people["pharmacist"])
    stubber.add_response("publish", {"MessageId": "sns-123"},
                         # The reviewed text, then its reply link (the same link on every attempt).
                         {"PhoneNumber": "+15555550100", "Message": dispatch.body_for_sending(notice.message),
                          "MessageAttributes": {"AWS.SNS.SMS.SMSType": {"DataType": "String",
                                                                        "StringValue": "Transactional"}}})

    result = dispatch.dispatch_ready(sms_client=client)

    assert result.sent == 1
    notice.refresh_from_db()
    assert notice.message.provider_id == "sns-123" and notice.status == "sent"
    stubber.assert_no_pending_responses()


def test_transient_failures_back_off_then_give_up(people, drafts, sns, monkeypatch):
    client, stubber = sns
    monkeypatch.setattr("django.conf.settings.UNSAY_OUTBOX_MAX_ATTEMPTS", 2)
    notice = drafts["SYN-D"]
    approve(notice.pk, user=people["pharmacist"])
    stubber.add_client_error("publish", service_error_code="Throttling", http_status_code=400)

    first = dispatch.dispatch_ready(sms_client=client)

    message = OutboxMessage.objects.get(correction=notice)
    assert first.retrying == 1 and message.status == "ready" and message.attempts == 1
    assert message.next_attempt_at > timezone.now() + timedelta(seconds=20)
    assert "Throttling" in message.last_error
    assert dispatch.dispatch_ready(sms_client=client).claimed == 0  # not due yet
    OutboxMessage.objects.filter(pk=message.pk).update(next_attempt_at=timezone.now())
    stubber.add_client_error("publish", service_error_code="InternalError", http_status_code=500)

    second = dispatch.dispatch_ready(sms_client=client)

    message.refresh_from_db()
    assert second.failed == 1 and message.status == "failed" and message.attempts == 2
    assert notice.audit_events.filter(action=AuditEvent.Action.SEND_FAILED).count() == 2


def test_email_transient_error_is_retried_later(people, drafts, monkeypatch):
    approve(drafts["SYN-A"].pk, user=people["pharmacist"])

    def refuse(self, *args, **kwargs):
        raise smtplib.SMTPServerDisconnected("connection dropped")

    monkeypatch.setattr("django.core.mail.EmailMessage.send", refuse)
    result = dispatch.dispatch_ready()
    assert result.retrying == 1
    assert OutboxMessage.objects.get(correction=drafts["SYN-A"]).status == "ready"


def test_sms_disabled_fails_with_a_clear_reason(people, drafts, settings):
    settings.UNSAY_SNS_ENABLED = False
    approve(drafts["SYN-D"].pk, user=people["pharmacist"])
    assert dispatch.dispatch_ready().failed == 1
    message = OutboxMessage.objects.get(correction=drafts["SYN-D"])
    assert message.status == "failed" and "UNSAY_SNS_ENABLED" in message.last_error


def test_without_sns_the_demo_writes_sms_to_files_once_per_dedupe_key(people, drafts, settings, tmp_path):
    settings.UNSAY_SNS_ENABLED = False
    settings.UNSAY_SMS_TO_FILE = True  # the demo profile's default
    settings.SMS_FILE_PATH = tmp_path
    approve(drafts["SYN-D"].pk, user=people["pharmacist"])
    assert dispatch.dispatch_ready().sent == 1
    message = OutboxMessage.objects.get(correction=drafts["SYN-D"])
    written = tmp_path / f"{message.dedupe_key}.txt"
    assert message.status == "sent" and message.provider_id == f"file:{written}"
    assert written.read_text().startswith(f"To: {message.recipient}\n\n") and message.body[:50] in written.read_text()
    assert list(tmp_path.iterdir()) == [written]


def test_a_claim_without_a_result_is_flagged_for_a_human_and_not_resent(people, drafts):
    approve(drafts["SYN-A"].pk, user=people["pharmacist"])
    [claimed] = dispatch.claim(worker="crashed-worker")  # the process "dies" here
    OutboxMessage.objects.filter(pk=claimed).update(claimed_at=timezone.now() - timedelta(hours=1))

    assert dispatch.flag_unknown_outcomes() == 1
    assert dispatch.dispatch_ready().claimed == 0
    message = OutboxMessage.objects.get(pk=claimed)
    assert message.status == "unknown" and "check with the provider" in message.last_error
    assert mail.outbox == []
    assert AuditEvent.objects.filter(action=AuditEvent.Action.SEND_UNKNOWN).count() == 1


def test_a_requeued_message_queues_the_next_dispatch_once_its_requeue_commits(people, drafts, dispatch_not_enqueued):
    approve(drafts["SYN-A"].pk, user=people["pharmacist"])
    [claimed] = dispatch.claim(worker="crashed-worker")
    OutboxMessage.objects.filter(pk=claimed).update(claimed_at=timezone.now() - timedelta(hours=1))
    dispatch.flag_unknown_outcomes()
    queued_before = len(dispatch_not_enqueued)

    dispatch.requeue(claimed, user=people["pharmacist"], note="provider says not delivered",
                     confirmed_not_delivered=True)

    assert len(dispatch_not_enqueued) == queued_before + 1
    assert dispatch.dispatch_ready().sent == 1 and len(mail.outbox) == 1


def test_a_message_staled_after_claim_is_cancelled_not_sent(people, drafts):
    approve(drafts["SYN-A"].pk, user=people["pharmacist"])
    Correction.objects.filter(pk=drafts["SYN-A"].pk).update(status=Correction.Status.STALE)
    result = dispatch.dispatch_ready()
    assert result.sent == 0 and mail.outbox == []
    assert OutboxMessage.objects.get(correction=drafts["SYN-A"]).status == "cancelled"
    # The cancel is a state change like any other: audited, by the dispatcher, with the reason.
    [event] = AuditEvent.objects.filter(correction=drafts["SYN-A"], action=AuditEvent.Action.CANCELLED)
    assert (event.actor_label, event.before, event.after) == ("dispatcher", {"status": "sending"},
                                                               {"status": "cancelled"})
    assert event.note == "correction is stale"
