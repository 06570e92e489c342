"""What the pharmacy did about each recall: the standard steps (who and when), the "checked, none
found" finding, every manual contact with a patient, and an audit event per change.

Rows are written only by worklist.services; reads live in the modules of their job (exposure,
patient_state, recall_list, recall_pages, recall_report, contact_history, match_classes).
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from core.audit_chain import ChainedEvent


class RecallWork(models.Model):
    """The pharmacy's file on one recall, opened the first time anyone acts on it."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    recall_number = models.CharField(max_length=40, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    # "Checked, none found": exposure was checked and no patient received the recalled product.
    # First-class because it is what an inspector asks for on a recall that touched nobody.
    none_found_at = models.DateTimeField(null=True, blank=True)
    none_found_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="+")
    none_found_note = models.TextField(blank=True)

    def __str__(self):
        return f"worklist {self.recall_number}"


class Step(models.TextChoices):
    ACKNOWLEDGE = "acknowledge", _("Acknowledge the recall")
    CHECK_STOCK = "check_stock", _("Check stock / quarantine")
    NOTIFY = "notify", _("Notify patients")
    FOLLOW_UP = "follow_up", _("Follow up patients not reached")
    CLOSE = "close", _("Close")


STEP_ORDER = [Step.ACKNOWLEDGE, Step.CHECK_STOCK, Step.NOTIFY, Step.FOLLOW_UP, Step.CLOSE]


class RecallTask(models.Model):
    """One completed standard step of a recall: who did it, when, and what they noted."""

    work = models.ForeignKey(RecallWork, on_delete=models.CASCADE, related_name="tasks")
    step = models.CharField(max_length=16, choices=Step.choices)
    done_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    done_at = models.DateTimeField()
    note = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["work", "step"], name="recall_task_once")]
        ordering = ["done_at", "id"]

    def __str__(self):
        return f"{self.work.recall_number}: {self.get_step_display()}"


class ContactAttempt(models.Model):
    """A manual contact with a patient about a recall (outbox sends are read from the outbox itself)."""

    class Method(models.TextChoices):
        PHONE = "phone", _("Phone call")
        LETTER = "letter", _("Letter printed and posted")
        IN_PERSON = "in_person", _("In person at the pharmacy")
        EMAIL = "email", _("Email (sent by hand)")
        SMS = "sms", _("SMS (sent by hand)")

    class Outcome(models.TextChoices):
        REACHED = "reached", _("Reached")
        NOT_REACHED = "not_reached", _("Not reached")
        WRONG_NUMBER = "wrong_number", _("Wrong number / address")
        POSTED = "posted", _("Letter posted")
        NOT_NEEDED = "not_needed", _("No contact needed (reason noted)")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    recall_number = models.CharField(max_length=40)
    patient = models.ForeignKey("patients.Patient", on_delete=models.PROTECT, related_name="contact_attempts")
    correction = models.ForeignKey("corrections.Correction", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="contact_attempts")
    method = models.CharField(max_length=12, choices=Method.choices)
    outcome = models.CharField(max_length=14, choices=Outcome.choices)
    note = models.TextField(blank=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            # Used by the recall page, the report and the follow-up queue: one recall's contacts.
            models.Index(fields=["recall_number", "patient", "at"], name="contact_recall_patient"),
            # Used by the patient's audit trail.
            models.Index(fields=["patient", "at"], name="contact_patient"),
        ]

    def __str__(self):
        return f"{self.get_method_display()} {self.get_outcome_display()} ({self.recall_number})"


class WorkEvent(ChainedEvent):
    """Audit trail of the worklist: every step, finding and contact, naming the user; a link of the one
    audit chain (core.audit_chain). An erasure blanks the details of events about, or naming, a patient."""

    CHAIN_STRUCTURE = ("at", "actor_id", "actor_label", "action", "recall_number", "patient_id")
    CHAIN_REDACTABLE = ("details",)

    class Action(models.TextChoices):
        STEP = "step", _("Step completed")
        NONE_FOUND = "none_found", _("Checked, none found")
        CONTACT = "contact", _("Contact logged")

    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    actor_label = models.CharField(max_length=150)
    action = models.CharField(max_length=12, choices=Action.choices)
    recall_number = models.CharField(max_length=40)
    patient = models.ForeignKey("patients.Patient", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="+")
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["patient", "at"], name="workevent_patient"),
                   models.Index(fields=["recall_number", "at"], name="workevent_recall")]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_label} {self.action} {self.recall_number}"


class PatientAnswer(models.Model):
    """What a patient told us about a recalled medicine, recorded on their recall row: through the reply
    link of a sent letter (replies app). One per letter at most; the newest answer of a patient on a
    recall is the one the row shows."""

    class Answer(models.TextChoices):
        STOPPED = "stopped", _("I have stopped using it")
        RETURNED = "returned", _("I returned it to the pharmacy")
        STILL_HAVE = "still_have", _("I still have it")
        QUESTION = "question", _("I have a question")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    recall_number = models.CharField(max_length=40)
    patient = models.ForeignKey("patients.Patient", on_delete=models.PROTECT, related_name="answers")
    correction = models.OneToOneField("corrections.Correction", null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="patient_answer")
    answer = models.CharField(max_length=12, choices=Answer.choices)
    # The patient's own words (a question); bounded by replies.forms.MAX_TEXT. Erased on request.
    text = models.TextField(blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            # Used by the recall page and the effectiveness report: one recall's answers.
            models.Index(fields=["recall_number", "patient", "at"], name="answer_recall_patient"),
        ]

    def __str__(self):
        return f"{self.get_answer_display()} ({self.recall_number})"


class PatientTask(models.Model):
    """Something a pharmacist must do about one patient on one recall: answer a question, call a patient
    who still has a Class I pack, follow up a letter nobody answered. Open until marked done."""

    class Reason(models.TextChoices):
        QUESTION = "question", _("The patient asked a question")
        STOPPED = "stopped", _("The patient has stopped the medicine")
        STILL_HAVE = "still_have", _("The patient still has a Class I recalled pack")
        NO_REPLY = "no_reply", _("No reply to the letter")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    recall_number = models.CharField(max_length=40)
    patient = models.ForeignKey("patients.Patient", on_delete=models.PROTECT, related_name="worklist_tasks")
    reason = models.CharField(max_length=12, choices=Reason.choices)
    answer = models.ForeignKey(PatientAnswer, null=True, blank=True, on_delete=models.PROTECT, related_name="tasks")
    created = models.DateTimeField()
    done_at = models.DateTimeField(null=True, blank=True)
    done_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                related_name="+")

    class Meta:
        ordering = ["created", "id"]
        constraints = [
            # One open task per patient, recall and reason: a replayed reply or a second follow-up run adds none.
            models.UniqueConstraint(fields=["recall_number", "patient", "reason"], condition=models.Q(done_at=None),
                                    name="patient_task_open_once"),
        ]
        indexes = [models.Index(fields=["recall_number", "patient"], name="patient_task_recall")]

    def __str__(self):
        return f"{self.get_reason_display()} ({self.recall_number})"
