"""The outbox dispatcher: claim approved messages safely, send each through the patient's channel,
record the result. Exactly once, or flagged for a human.

- Claim: one conditional UPDATE over a FOR UPDATE SKIP LOCKED subquery, committed before sending,
  so two dispatchers never take the same row. ONE message per claim: the claim is the record that
  a send is being attempted, so a dispatcher killed at any point leaves at most one message whose
  outcome is unknown (claiming 50 at a time stranded 1,195 messages over 42 kills, 34 of them sent).
- Send: email via Django's email backend (Message-ID = the dedupe key), SMS via Amazon SNS when
  settings.UNSAY_SNS_ENABLED. Transient failures go back to `ready` with exponential backoff.
- A row left in `sending` (the process died between claim and result) may or may not have gone
  out: it is flagged `unknown` for a human after UNSAY_OUTBOX_CLAIM_TIMEOUT seconds, never resent
  by itself. A pharmacist requeues unknown or failed messages (`requeue`, audited), which also
  re-reads the recipient from the patient's current contact details.
"""

import logging
import os
import smtplib
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import override

from core import aws, enqueue
from corrections import audit, transitions
from corrections.drafting import language_of, letter_html
from corrections.models import AuditEvent, Correction, OutboxMessage
from corrections.review import require_reviewer
from corrections.triggers import DISPATCH_OUTBOX

log = logging.getLogger(__name__)

DISPATCH_ACTOR = audit.DISPATCHER


class TransientSendError(Exception):
    """Worth retrying later (network, throttling, provider 5xx)."""


class PermanentSendError(Exception):
    """Retrying will not help (no address, SMS disabled, rejected parameter)."""


def max_attempts() -> int:
    return settings.UNSAY_OUTBOX_MAX_ATTEMPTS


def claim_timeout() -> int:
    return settings.UNSAY_OUTBOX_CLAIM_TIMEOUT


def backoff_seconds(attempt: int) -> int:
    base = settings.UNSAY_OUTBOX_BACKOFF
    return min(3600, base * 2 ** max(0, attempt - 1))


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"[:100]


@dataclass
class DispatchResult:
    claimed: int = 0
    sent: int = 0
    retrying: int = 0
    failed: int = 0
    sent_ids: list[int] = field(default_factory=list)

    def summary(self) -> str:
        return f"claimed {self.claimed}, sent {self.sent}, retrying {self.retrying}, failed {self.failed}"


def claim(batch: int = 1, *, worker: str | None = None) -> list[int]:
    """Atomically move up to `batch` due rows from ready to sending; returns their ids. The
    dispatcher claims one at a time (see the module docstring); `batch` > 1 is for tests only.

    Two statements in one transaction, not `UPDATE ... WHERE id IN (SELECT ... LIMIT n FOR UPDATE
    SKIP LOCKED)`: PostgreSQL may rescan that subquery per outer row, and then LIMIT 1 claimed every
    ready row at once (seen here: 45 of 45 claimed by one dispatcher, 44 stranded by one kill)."""
    table = OutboxMessage._meta.db_table
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT id FROM {table}
            WHERE status = 'ready' AND (next_attempt_at IS NULL OR next_attempt_at <= %s)
            ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
            """,
            [now, batch],
        )
        ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            return []
        # Locked above in this transaction: every one of them is still ready, and now ours.
        worker = worker or worker_name()
        moved = transitions.move(OutboxMessage, {"id__in": ids}, OutboxMessage.Status.READY,
                                 OutboxMessage.Status.SENDING, claimed_at=now, claimed_by=worker,
                                 attempts=F("attempts") + 1)
        return sorted(ids) if moved == len(ids) else sorted(OutboxMessage.objects.filter(
            id__in=ids, status=OutboxMessage.Status.SENDING, claimed_by=worker, claimed_at=now).values_list(
            "id", flat=True))


# What a message ends with as it is sent, below the reviewed text: functions of the message returning a
# line or "", registered by the layers above (replies.apps adds the reply link). Not stored in the body, so
# the pharmacist reviews the letter alone and the link is never edited by hand.
SEND_FOOTERS: list = []


def body_for_sending(message: OutboxMessage) -> str:
    lines = [line for line in (footer(message) for footer in SEND_FOOTERS) if line]
    return "\n\n".join([message.body, *lines]) if lines else message.body


def send_email(message: OutboxMessage) -> str:
    if not message.recipient:
        raise PermanentSendError("the patient has no email address on file")
    body = body_for_sending(message)
    email = EmailMultiAlternatives(subject=message.subject, body=body, to=[message.recipient],
                                   headers={"Message-ID": message.message_id})
    # The HTML part is built from exactly the reviewed text (drafting.letter_html), never from elsewhere.
    with override(language_of(getattr(getattr(message, "correction", None), "patient", None))):
        email.attach_alternative(letter_html(body), "text/html")
    try:
        email.send(fail_silently=False)
    except (smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused) as exc:
        raise PermanentSendError(str(exc)) from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise TransientSendError(str(exc)) from exc
    return message.message_id


def sns_client():
    return aws.client("sns")


def send_sms(message: OutboxMessage, client=None) -> str:
    if not message.recipient:
        raise PermanentSendError("the patient has no phone number on file")
    if not settings.UNSAY_SNS_ENABLED:
        if settings.UNSAY_SMS_TO_FILE:
            return write_sms_file(message)
        raise PermanentSendError("SMS is disabled (set UNSAY_SNS_ENABLED=1 to send through Amazon SNS)")
    # Loaded with the SNS client it goes with (core.aws loads boto3 on first use: about 0.3 s at start-up).
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

    client = client or sns_client()
    try:
        response = client.publish(PhoneNumber=message.recipient, Message=body_for_sending(message)[:1600],
                                  MessageAttributes={"AWS.SNS.SMS.SMSType": {"DataType": "String",
                                                                             "StringValue": "Transactional"}})
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in {"Throttling", "ThrottledException", "InternalError", "KMSThrottlingException"} or status >= 500:
            raise TransientSendError(f"SNS {code}: {exc}") from exc
        raise PermanentSendError(f"SNS {code}: {exc}") from exc
    except BotoCoreError as exc:
        raise TransientSendError(f"SNS: {exc}") from exc
    return response["MessageId"]


def write_sms_file(message: OutboxMessage) -> str:
    """The offline SMS transport (demo): one file per message, named by its dedupe key, so a
    re-send overwrites rather than duplicates, like the Message-ID does for email."""
    folder = Path(settings.SMS_FILE_PATH)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{message.dedupe_key}.txt"
    path.write_text(f"To: {message.recipient}\n\n{body_for_sending(message)[:1600]}\n")
    return f"file:{path}"


def send(message: OutboxMessage, *, sms_client=None) -> str:
    if message.channel == "sms":
        return send_sms(message, client=sms_client)
    return send_email(message)


def _finish_sent(message_id: int, worker: str, provider_id: str) -> bool:
    with transaction.atomic():
        updated = transitions.move(OutboxMessage, {"pk": message_id, "claimed_by": worker},
                                   OutboxMessage.Status.SENDING, OutboxMessage.Status.SENT, sent_at=timezone.now(),
                                   provider_id=provider_id[:200], last_error="")
        if updated != 1:
            return False
        message = OutboxMessage.objects.select_related("correction").get(pk=message_id)
        transitions.move(Correction, {"pk": message.correction_id}, Correction.Status.APPROVED,
                         Correction.Status.SENT, event={
                             "action": AuditEvent.Action.SENT, "by": DISPATCH_ACTOR,
                             "correction": message.correction_id, "before": {"status": "sending"},
                             "after": {"status": "sent", "provider_id": provider_id, "attempts": message.attempts}})
    return True


def _finish_failed(message: OutboxMessage, worker: str, exc: Exception, *, transient: bool) -> str:
    give_up = not transient or message.attempts >= max_attempts()
    status = OutboxMessage.Status.FAILED if give_up else OutboxMessage.Status.READY
    values = {"last_error": f"{type(exc).__name__}: {exc}"[:2000]}
    if not give_up:
        values["next_attempt_at"] = timezone.now() + timedelta(seconds=backoff_seconds(message.attempts))
    transitions.move(OutboxMessage, {"pk": message.pk, "claimed_by": worker}, OutboxMessage.Status.SENDING, status,
                     event={"action": AuditEvent.Action.SEND_FAILED, "by": DISPATCH_ACTOR,
                            "correction": message.correction_id, "before": {"status": "sending"},
                            "after": {"status": status, "attempts": message.attempts, "error": values["last_error"]}},
                     **values)
    return status


def _cancel_claimed(message: OutboxMessage):
    """Rejected or staled after approval: never send; undo our claim into cancelled, audited."""
    reason = f"correction is {message.correction.status}"
    transitions.move(OutboxMessage, {"pk": message.pk}, OutboxMessage.Status.SENDING, OutboxMessage.Status.CANCELLED,
                     last_error=reason, event={"action": AuditEvent.Action.CANCELLED, "by": DISPATCH_ACTOR,
                                               "correction": message.correction_id, "before": {"status": "sending"},
                                               "after": {"status": "cancelled"}, "note": reason})


def dispatch_ready(batch: int | None = None, *, sms_client=None, worker: str | None = None) -> DispatchResult:
    """Claim one message, send it, record the result; repeat until nothing is due. `batch` is kept
    for callers and ignored: a claim is always one message, so a crash strands at most one."""
    worker = worker or worker_name()
    result = DispatchResult()
    while True:
        ids = claim(1, worker=worker)
        if not ids:
            return result
        result.claimed += len(ids)
        for message in OutboxMessage.objects.filter(pk__in=ids).select_related("correction").order_by("id"):
            if message.correction.status != Correction.Status.APPROVED:
                _cancel_claimed(message)
                continue
            try:
                provider_id = send(message, sms_client=sms_client)
            except TransientSendError as exc:
                status = _finish_failed(message, worker, exc, transient=True)
                result.retrying += status == OutboxMessage.Status.READY
                result.failed += status == OutboxMessage.Status.FAILED
                continue
            except PermanentSendError as exc:
                _finish_failed(message, worker, exc, transient=False)
                result.failed += 1
                continue
            if _finish_sent(message.pk, worker, provider_id):
                result.sent += 1
                result.sent_ids.append(message.pk)


def flag_unknown_outcomes(*, older_than_seconds: int | None = None) -> int:
    """Rows claimed but never resolved (the dispatcher died mid-send): flag for a human, don't resend."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds if older_than_seconds is not None
                                        else claim_timeout())
    flagged = 0
    for message in OutboxMessage.objects.filter(status=OutboxMessage.Status.SENDING, claimed_at__lt=cutoff):
        flagged += transitions.move(
            OutboxMessage, {"pk": message.pk, "claimed_at": message.claimed_at}, OutboxMessage.Status.SENDING,
            OutboxMessage.Status.UNKNOWN,
            last_error="claimed but no send result recorded: check with the provider before resending",
            event={"action": AuditEvent.Action.SEND_UNKNOWN, "by": DISPATCH_ACTOR, "correction": message.correction_id,
                   "before": {"status": "sending"}, "after": {"status": "unknown", "claimed_by": message.claimed_by}})
    return flagged


REQUEUEABLE = (OutboxMessage.Status.UNKNOWN, OutboxMessage.Status.FAILED)


class NotRequeueable(ValueError):
    pass


class ConfirmationNeeded(NotRequeueable):
    """An *unknown* message may have reached the mail server or the SMS provider before the crash: sending
    it again may send a second letter. A pharmacist must confirm it did not go out."""


def requeue(message_id: int, *, user, note: str = "", confirmed_not_delivered: bool = False) -> OutboxMessage:
    """A pharmacist sends an unknown or failed message again: back to `ready` with fresh attempts,
    the recipient re-read from the patient's current contact, one audit event naming the user with
    the before/after status and recipient. An `unknown` message is requeued only with
    confirmed_not_delivered (the pharmacist checked with the provider that it did not go out; the
    audit event records who confirmed); else ConfirmationNeeded and nothing changes. The same
    Message-ID lets mail systems drop a duplicate. Dispatch is enqueued after commit."""
    require_reviewer(user)
    with transaction.atomic():
        message = (OutboxMessage.objects.select_for_update(of=("self",)).select_related("correction__patient")
                   .get(pk=message_id))
        if message.status not in REQUEUEABLE:
            raise NotRequeueable(f"message {message.pk} is {message.get_status_display().lower()}; only unknown "
                                 f"or failed messages can be requeued")
        if message.status == OutboxMessage.Status.UNKNOWN and not confirmed_not_delivered:
            raise ConfirmationNeeded(f"message {message.pk} may have been delivered before the crash; confirm with "
                                     f"the provider that it was not, then requeue it with that confirmation")
        if message.correction.status != Correction.Status.APPROVED:
            raise NotRequeueable(f"its correction is {message.correction.get_status_display().lower()}, "
                                 f"not approved")
        before = {"status": message.status, "channel": message.channel, "recipient": message.recipient,
                  "attempts": message.attempts, "last_error": message.last_error[:500]}
        channel, recipient = message.correction.patient.contact()
        transitions.move_row(
            message, OutboxMessage.Status.READY, channel=channel, recipient=recipient, attempts=0,
            next_attempt_at=None, claimed_at=None, claimed_by="", last_error="",
            event={"action": AuditEvent.Action.REQUEUED, "by": user, "correction": message.correction_id,
                   "before": before,
                   "after": {"status": "ready", "channel": channel, "recipient": recipient,
                             "recipient_changed": recipient != before["recipient"] or channel != before["channel"],
                             **({"confirmed_not_delivered_by": user.get_username()}
                                if before["status"] == OutboxMessage.Status.UNKNOWN else {})},
                   "note": note[:500]})
        # By name, as approval does: outbox.tasks imports this module.
        enqueue.send_on_commit(DISPATCH_OUTBOX)
    return message
