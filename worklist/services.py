"""Every worklist state change: one function each, one transaction, the row plus a WorkEvent
naming the user. Rules that refuse a change raise WorkflowError with a sentence for the pharmacist."""

from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from core.retry import run_in_transaction
from corrections.models import OutboxMessage
from corrections.review import can_review

from . import patient_state, recall_list, recall_pages
from .models import STEP_ORDER, ContactAttempt, PatientAnswer, PatientTask, RecallTask, RecallWork, Step, WorkEvent


class WorkflowError(ValidationError):
    pass


def _require_pharmacist(user):
    if not can_review(user):
        raise PermissionDenied("Only pharmacists run recall worklists.")


def open_work(recall_number: str) -> RecallWork:
    if not recall_number or not recall_pages.recall_known(recall_number):
        raise WorkflowError(f"No recall {recall_number!r} is on file.")
    work, _ = RecallWork.objects.get_or_create(recall_number=recall_number)
    return work


def _event(user, action, recall_number, *, patient=None, **details):
    WorkEvent.objects.create(actor=user, actor_label=user.get_username(), action=action,
                             recall_number=recall_number, patient=patient, details=details)


def _check_step(step: str, work: RecallWork, done: dict, f: recall_pages.RecallFile):
    """Why `step` cannot be recorded now, or None. The order is the standard one; notify and follow
    up are satisfied by a "checked, none found" finding."""
    if step in done:
        return f"“{Step(step).label}” was already recorded by {done[step].done_by.get_username()} " \
               f"at {done[step].done_at:%Y-%m-%d %H:%M} UTC."
    if step != Step.ACKNOWLEDGE and Step.ACKNOWLEDGE not in done:
        return "Acknowledge the recall first."
    if step == Step.NOTIFY and not f.none_found and f.not_attempted:
        names = ", ".join(ln.patient.display_name for ln in f.not_attempted[:5])
        return (f"{len(f.not_attempted)} exposed patient(s) have no contact attempt yet ({names}"
                f"{'…' if len(f.not_attempted) > 5 else ''}): approve their messages or log a contact first.")
    if step == Step.FOLLOW_UP:
        if Step.NOTIFY not in done:
            return "Notify patients first."
        if f.unaccounted:
            return f"{len(f.unaccounted)} patient(s) are not yet reached or accounted for."
    if step == Step.CLOSE:
        missing = [Step(s).label for s in STEP_ORDER[:-1] if s not in done]
        if missing:
            return "Before closing: " + "; ".join(str(m) for m in missing) + "."
        if f.unaccounted:
            return (f"Every exposed patient must be accounted for before closing: {len(f.unaccounted)} "
                    "are not (reached, notified, or no contact needed with a reason).")
    return None


def complete_step(recall_number: str, step: str, *, user, note: str = "") -> RecallTask:
    _require_pharmacist(user)
    if step not in Step.values:
        raise WorkflowError(f"Unknown step {step!r}.")
    note = (note or "").strip()
    if step == Step.CHECK_STOCK and not note:
        raise WorkflowError("Say what the stock check found (e.g. “2 packs of lot X quarantined” or “none in stock”).")

    def _do():
        work = open_work(recall_number)
        RecallWork.objects.select_for_update().get(pk=work.pk)  # one step change per recall at a time
        done = {t.step: t for t in work.tasks.select_related("done_by")}
        reason = _check_step(step, work, done, recall_pages.recall_file(recall_number))
        if reason:
            raise WorkflowError(reason)
        task = RecallTask.objects.create(work=work, step=step, done_by=user, done_at=timezone.now(), note=note)
        _event(user, WorkEvent.Action.STEP, recall_number, step=step, note=note)
        return task

    return run_in_transaction(_do)


def record_none_found(recall_number: str, *, user, note: str = "") -> RecallWork:
    """"Checked, none found": exposure was checked and no patient on file received the product.
    Completes notify and follow-up as not needed; refused while anyone is exposed."""
    _require_pharmacist(user)

    def _do():
        work = RecallWork.objects.select_for_update().get(pk=open_work(recall_number).pk)
        if work.none_found_at:
            raise WorkflowError("“Checked, none found” is already recorded.")
        if not work.tasks.filter(step=Step.ACKNOWLEDGE).exists():
            raise WorkflowError("Acknowledge the recall first.")
        exposed = patient_state.patient_lines(recall_number)
        if exposed:
            raise WorkflowError(f"{len(exposed)} patient(s) are on file for this recall, so it cannot be "
                                "recorded as “checked, none found”.")
        now = timezone.now()
        work.none_found_at, work.none_found_by = now, user
        work.none_found_note = (note or "").strip() or "Dispensing records checked; no patient received it."
        work.save(update_fields=["none_found_at", "none_found_by", "none_found_note"])
        for step in (Step.NOTIFY, Step.FOLLOW_UP):
            RecallTask.objects.get_or_create(work=work, step=step, defaults={
                "done_by": user, "done_at": now, "note": "Not needed: checked, none found."})
        _event(user, WorkEvent.Action.NONE_FOUND, recall_number, note=work.none_found_note)
        return work

    return run_in_transaction(_do)


def log_contact(recall_number: str, patient, *, user, method: str, outcome: str, note: str = "",
                correction=None) -> ContactAttempt:
    _require_pharmacist(user)
    if method not in ContactAttempt.Method.values:
        raise WorkflowError(f"Unknown contact method {method!r}.")
    if outcome not in ContactAttempt.Outcome.values:
        raise WorkflowError(f"Unknown outcome {outcome!r}.")
    note = (note or "").strip()
    if outcome == ContactAttempt.Outcome.NOT_NEEDED and not note:
        raise WorkflowError("Say why no contact is needed (e.g. “patient stopped this medicine in 2023”).")
    if outcome == ContactAttempt.Outcome.POSTED and method != ContactAttempt.Method.LETTER:
        raise WorkflowError("“Letter posted” goes with the method “Letter printed and posted”.")

    def _do():
        work = open_work(recall_number)
        if work.tasks.filter(step=Step.CLOSE).exists():
            raise WorkflowError("This recall is closed; nothing more can be logged on it.")
        attempt = ContactAttempt.objects.create(recall_number=recall_number, patient=patient, correction=correction,
                                                method=method, outcome=outcome, note=note, by=user,
                                                at=timezone.now())
        _event(user, WorkEvent.Action.CONTACT, recall_number, patient=patient, method=method, outcome=outcome,
               note=note)
        return attempt

    return run_in_transaction(_do)


def record_answer(correction, answer: str, *, text: str = "", now=None) -> PatientAnswer:
    """A patient's answer to a sent letter, on their recall row; in the caller's transaction (replies.services
    holds the link's lock). A question, "I have stopped using it" (they may be without a medicine they need:
    a replacement, or a word on stopping it suddenly), or "I still have it" on a Class I recall opens a task
    for a pharmacist."""
    if answer not in PatientAnswer.Answer.values:
        raise WorkflowError(f"Unknown answer {answer!r}.")
    now = now or timezone.now()
    recorded = PatientAnswer.objects.create(recall_number=correction.recall_number, patient_id=correction.patient_id,
                                            correction=correction, answer=answer, text=text if answer ==
                                            PatientAnswer.Answer.QUESTION else "", at=now)
    reason = None
    if answer == PatientAnswer.Answer.QUESTION:
        reason = PatientTask.Reason.QUESTION
    elif answer == PatientAnswer.Answer.STOPPED:
        reason = PatientTask.Reason.STOPPED
    elif answer == PatientAnswer.Answer.STILL_HAVE and recall_is_class1(correction):
        reason = PatientTask.Reason.STILL_HAVE
    if reason:
        open_task(correction.recall_number, correction.patient_id, reason, answer=recorded, now=now)
    # An answer is a reply: the follow-up for "no reply" is done.
    PatientTask.objects.filter(recall_number=correction.recall_number, patient_id=correction.patient_id,
                               reason=PatientTask.Reason.NO_REPLY, done_at=None).update(done_at=now)
    return recorded


def recall_is_class1(correction) -> bool:
    facts = recall_list.recall_facts([correction.recall_number]).get(correction.recall_number)
    return (facts.classification if facts and facts.classification else correction.classification) == "Class I"


def open_task(recall_number: str, patient_id: int, reason: str, *, answer=None, now=None) -> PatientTask | None:
    """One open task per patient, recall and reason (a partial unique index): a second one is not added."""
    task = PatientTask(recall_number=recall_number, patient_id=patient_id, reason=reason, answer=answer,
                       created=now or timezone.now())
    exists = PatientTask.objects.filter(recall_number=recall_number, patient_id=patient_id, reason=reason,
                                        done_at=None)
    if exists.exists():
        return None
    task.save()
    return task


def complete_patient_task(code, *, user) -> PatientTask:
    _require_pharmacist(user)

    def _do():
        task = PatientTask.objects.select_for_update().get(public_id=code)
        if task.done_at is None:
            task.done_at, task.done_by = timezone.now(), user
            task.save(update_fields=["done_at", "done_by"])
            _event(user, WorkEvent.Action.CONTACT, task.recall_number, patient=task.patient,
                   task=task.reason, outcome="task done")
        return task

    return run_in_transaction(_do)


def open_no_reply_tasks(*, days: int, now=None) -> int:
    """A follow-up task for every sent letter with a reply link and no answer after `days` days: the
    patient may not have read it. Idempotent (one open task per patient and recall)."""
    now = now or timezone.now()
    cutoff = now - timezone.timedelta(days=days)
    sent = (OutboxMessage.objects.filter(status=OutboxMessage.Status.SENT, sent_at__lte=cutoff,
                                         correction__patient_answer__isnull=True)
            .exclude(correction__recall_number="")
            .values_list("correction__recall_number", "correction__patient_id").distinct())
    opened = 0
    for recall_number, patient_id in sent:
        if PatientAnswer.objects.filter(recall_number=recall_number, patient_id=patient_id).exists():
            continue
        if PatientTask.objects.filter(recall_number=recall_number, patient_id=patient_id,
                                      reason=PatientTask.Reason.NO_REPLY).exists():
            continue  # one follow-up per patient and recall, even once done
        opened += open_task(recall_number, patient_id, PatientTask.Reason.NO_REPLY, now=now) is not None
    return opened


__all__ = ["WorkflowError", "complete_patient_task", "complete_step", "log_contact", "open_no_reply_tasks",
           "open_work", "record_answer", "record_none_found"]


def redact_patient_notes(patient_id: int) -> tuple[dict[str, int], list[int]]:
    """A patient's contact notes and the details of worklist events about them, erased on request
    (privacy.services): free text typed by staff may name them. Method, outcome and times stay. Returns
    (rows changed per kind, ids of the worklist events redacted: the erasure's audit event names them, so
    the audit chain knows why their details are gone)."""
    event_ids = sorted(WorkEvent.objects.filter(patient_id=patient_id, redacted=False).values_list("id", flat=True))
    events = WorkEvent.objects.filter(patient_id=patient_id).update(details={}, redacted=True)
    return {
        "contact attempts": ContactAttempt.objects.filter(patient_id=patient_id).update(note=""),
        "worklist events": events,
        "patient answers": PatientAnswer.objects.filter(patient_id=patient_id).exclude(text="").update(text=""),
    }, event_ids
