"""Reads for the recall worklist: the list of recalls, one recall's patients and what was done for
each, the deadline, the follow-up queue and the effectiveness report. No writes here."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace

from django.conf import settings
from django.db.models import Case, CharField, Count, F, Max, Min, Q, Value, When
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from corrections.models import CLASS_SEVERITY, Correction, OutboxMessage, Redecision
from memory.models import Fact
from patients.models import Patient

from .models import STEP_ORDER, ContactAttempt, RecallTask, RecallWork, Step

# --- match classes ------------------------------------------------------------------------------
# drugs.matching (identity helper) names how sure a match is. Until Correction carries its own
# `match_class`, the sweep's Correction.match maps onto the nearest class: a (drug, lot) match is
# "probable" (ingredients + lot; "confirmed" needs the NDC product too), a drug-only match is a
# "candidate". When the field exists it is used as is, in Python and in SQL.
MATCH_CLASSES = ["confirmed", "probable", "product_all_lots", "candidate"]
MATCH_CLASS_LABELS = {"confirmed": _("Confirmed"), "probable": _("Probable"),
                      "product_all_lots": _("Product, all lots"), "candidate": _("Candidate"),
                      "asked": _("Asked")}
LEGACY_MATCH_CLASS = {Correction.Match.LOT: "probable", Correction.Match.DRUG: "candidate",
                      Correction.Match.ASKED: "asked", "lot": "probable", "drug": "candidate"}


def has_match_class_field() -> bool:
    return any(f.name == "match_class" for f in Correction._meta.get_fields())


def match_class_of(obj) -> str:
    """'confirmed' / 'probable' / 'product_all_lots' / 'candidate' / 'asked' for a Correction or Exposure."""
    value = getattr(obj, "match_class", None)
    if value:
        return str(getattr(value, "value", value))
    return LEGACY_MATCH_CLASS.get(getattr(obj, "match", ""), "candidate")


def match_class_sql():
    if has_match_class_field():
        return F("match_class")
    return Case(*[When(match=k, then=Value(v)) for k, v in
                  ((Correction.Match.LOT, "probable"), (Correction.Match.DRUG, "candidate"))],
                default=Value("asked"), output_field=CharField())


# --- recall facts -------------------------------------------------------------------------------


@dataclass
class RecallFacts:
    recall_number: str
    classification: str = ""
    status: str = ""
    subject: str = ""
    product: str = ""
    reason: str = ""
    firm: str = ""
    first_notified: datetime | None = None  # first version of any fact of this recall
    latest: datetime | None = None
    first_class1: datetime | None = None  # belief time of the first Class I version

    @property
    def severity(self) -> int:
        return CLASS_SEVERITY.get(self.classification, 0)


def recall_facts(numbers) -> dict[str, RecallFacts]:
    """One GROUP BY for the times, one read of the believed versions for class, status and product."""
    numbers = [n for n in set(numbers) if n]
    if not numbers:
        return {}
    out = {n: RecallFacts(n) for n in numbers}
    base = Fact.objects.filter(kind=Fact.Kind.RECALL, attributes__recall_number__in=numbers)
    for row in base.values("attributes__recall_number").annotate(
        first=Min("asserted_at"), latest=Max("asserted_at"),
        first_class1=Min("asserted_at", filter=Q(attributes__classification="Class I")),
    ):
        r = out.get(row["attributes__recall_number"])
        if r:
            r.first_notified, r.latest, r.first_class1 = row["first"], row["latest"], row["first_class1"]
    for number, attrs, subject in (base.filter(retracted_at__isnull=True).order_by("fact_key")
                                   .values_list("attributes__recall_number", "attributes", "subject")):
        r = out.get(number)
        if r and not r.classification:
            r.classification = attrs.get("classification", "")
            r.status = attrs.get("status", "")
            r.subject = subject
            r.product = attrs.get("product_description", "")
            r.reason = attrs.get("reason", "")
            r.firm = attrs.get("firm", "")
    return out


# --- deadline -----------------------------------------------------------------------------------


@dataclass
class Deadline:
    state: str  # "none" (not Class I) | "due" | "overdue" | "met" | "missed"
    due_at: datetime | None = None
    done_at: datetime | None = None

    @property
    def label(self) -> str:
        return {"none": "", "due": _("Due"), "overdue": _("Overdue"), "met": _("Met"),
                "missed": _("Missed")}[self.state]

    @property
    def open(self) -> bool:
        return self.state in ("due", "overdue")


def deadline_for(first_class1: datetime | None, notified_at: datetime | None, *, now=None) -> Deadline:
    """Class I: patients must be notified within UNSAY_CLASS1_DEADLINE_DAYS of the pharmacy first
    believing the Class I version. `notified_at` is when the "notify patients" step was recorded."""
    if first_class1 is None:
        return Deadline("none")
    due = first_class1 + timedelta(days=settings.UNSAY_CLASS1_DEADLINE_DAYS)
    if notified_at is not None:
        return Deadline("met" if notified_at <= due else "missed", due, notified_at)
    now = now or timezone.now()
    return Deadline("due" if now <= due else "overdue", due)


# --- the worklist -------------------------------------------------------------------------------


@dataclass
class WorklistRow:
    facts: RecallFacts
    by_class: dict = field(default_factory=dict)
    answered: int = 0
    pending: int = 0
    approved: int = 0
    sent: int = 0
    not_reached: int = 0
    steps: dict = field(default_factory=dict)  # step -> RecallTask
    none_found: bool = False
    deadline: Deadline = field(default_factory=lambda: Deadline("none"))

    @property
    def recall_number(self):
        return self.facts.recall_number

    @property
    def closed(self) -> bool:
        return Step.CLOSE in self.steps

    @property
    def next_step(self):
        for step in STEP_ORDER:
            if step not in self.steps:
                return step
        return None

    @property
    def status(self) -> str:
        if self.closed:
            return _("Closed") + (" (" + _("checked, none found") + ")" if self.none_found else "")
        nxt = self.next_step
        return _("Next: %(step)s") % {"step": Step(nxt).label} if nxt else ""


def _not_reached_by_recall(numbers=None) -> dict[str, int]:
    """Patients with a failed attempt (send failed or unknown, not reached, wrong number) and no
    success (reached, letter posted, message sent, no contact needed) for the same recall."""
    M = OutboxMessage.Status
    bad: dict[str, set] = {}
    failed = Correction.objects.filter(message__status__in=[M.FAILED, M.UNKNOWN])
    manual_bad = ContactAttempt.objects.filter(outcome__in=[ContactAttempt.Outcome.NOT_REACHED,
                                                            ContactAttempt.Outcome.WRONG_NUMBER])
    if numbers is not None:
        failed, manual_bad = failed.filter(recall_number__in=numbers), manual_bad.filter(recall_number__in=numbers)
    for number, patient in [*failed.values_list("recall_number", "patient_id"),
                            *manual_bad.values_list("recall_number", "patient_id")]:
        bad.setdefault(number, set()).add(patient)
    if not bad:
        return {}
    patients = set().union(*bad.values())
    good = set(ContactAttempt.objects.filter(patient__in=patients, outcome__in=ACCOUNTED_OUTCOMES)
               .values_list("recall_number", "patient_id"))
    good |= set(Correction.objects.filter(patient__in=patients, status=Correction.Status.SENT)
                .values_list("recall_number", "patient_id"))
    return {n: len([p for p in ps if (n, p) not in good]) for n, ps in bad.items()}


ACCOUNTED_OUTCOMES = [ContactAttempt.Outcome.REACHED, ContactAttempt.Outcome.POSTED,
                      ContactAttempt.Outcome.NOT_NEEDED]


def worklist(*, now=None) -> list[WorklistRow]:
    """Every recall with a patient on file for it (a draft, a re-decided answer or an opened
    worklist), newest and most severe first. A constant number of queries, whatever the drafts."""
    S = Correction.Status
    rows: dict[str, WorklistRow] = {}
    counts = (Correction.objects.exclude(status=S.STALE).exclude(recall_number="")
              .annotate(mc=match_class_sql()).values("recall_number", "mc", "match")
              .annotate(n=Count("id"), pending=Count("id", filter=Q(status=S.DRAFT)),
                        approved=Count("id", filter=Q(status__in=[S.APPROVED, S.SENT])),
                        sent=Count("id", filter=Q(status=S.SENT))))
    for item in counts:
        row = rows.setdefault(item["recall_number"], WorklistRow(RecallFacts(item["recall_number"])))
        if item["match"] == Correction.Match.ASKED:
            row.answered += item["n"]
        if item["mc"] and item["mc"] != "asked":  # corrections carry their class too (drugs.matching)
            row.by_class[item["mc"]] = row.by_class.get(item["mc"], 0) + item["n"]
        row.pending += item["pending"]
        row.approved += item["approved"]
        row.sent += item["sent"]
    for number in Redecision.objects.exclude(recall_number="").values_list("recall_number", flat=True).distinct():
        rows.setdefault(number, WorklistRow(RecallFacts(number)))
    works = {w.recall_number: w for w in RecallWork.objects.all()}
    for number in works:
        rows.setdefault(number, WorklistRow(RecallFacts(number)))
    facts = recall_facts(rows)
    for task in RecallTask.objects.select_related("work", "done_by"):
        if task.work.recall_number in rows:
            rows[task.work.recall_number].steps[task.step] = task
    for number, n in _not_reached_by_recall().items():
        if number in rows:
            rows[number].not_reached = n
    for number, row in rows.items():
        row.facts = facts.get(number, row.facts)
        work = works.get(number)
        row.none_found = bool(work and work.none_found_at)
        notify = row.steps.get(Step.NOTIFY)
        row.deadline = deadline_for(row.facts.first_class1, notify.done_at if notify else None, now=now)
    never = datetime.min.replace(tzinfo=timezone.get_current_timezone())
    # Open before closed; then most severe; then newest (latest version believed).
    return sorted(rows.values(), key=lambda r: (r.closed, -r.facts.severity,
                                                -(r.facts.latest or never).timestamp(), r.recall_number))


def deadline_status(*, now=None) -> dict:
    """The status line: Class I recalls still due or overdue (for the worklist banner and JSON)."""
    rows = [r for r in worklist(now=now) if not r.closed]
    due = [r for r in rows if r.deadline.state == "due"]
    overdue = [r for r in rows if r.deadline.state == "overdue"]
    return {
        "open": len(rows), "due": len(due), "overdue": len(overdue),
        "next_due_at": min((r.deadline.due_at for r in due), default=None),
        "overdue_recalls": [r.recall_number for r in overdue],
    }


# --- one recall: its patients and what was done for each ----------------------------------------


@dataclass
class PatientLine:
    patient: object
    match_class: str
    exposures: list = field(default_factory=list)  # patients.services.Exposure
    corrections: list = field(default_factory=list)
    contacts: list = field(default_factory=list)
    state: str = "none"

    STATES = {
        "reached": _("Reached"), "notified": _("Notified (sent or posted)"), "not_needed": _("No contact needed"),
        "not_reached": _("Not reached"), "sending": _("Approved, sending"),
        "awaiting_review": _("Draft awaiting review"),
        "rejected": _("Draft rejected, no contact yet"), "none": _("No contact yet"),
    }

    @property
    def state_label(self):
        return self.STATES[self.state]

    @property
    def accounted(self) -> bool:
        return self.state in ("reached", "notified", "not_needed")

    @property
    def attempted(self) -> bool:
        return self.state not in ("none", "awaiting_review", "rejected")

    @property
    def current_correction(self):
        live = [c for c in self.corrections if c.status != Correction.Status.STALE]
        return live[-1] if live else (self.corrections[-1] if self.corrections else None)

    def attempts(self) -> list[dict]:
        """The contact log: outbox sends and manual entries, oldest first."""
        log = []
        for c in self.corrections:
            message = message_of(c)
            if message is None or c.status in (Correction.Status.DRAFT, Correction.Status.STALE):
                continue
            if message.status in (OutboxMessage.Status.HELD, OutboxMessage.Status.CANCELLED):
                continue
            log.append({"at": message.sent_at or c.reviewed_at, "method": message.channel,
                        "outcome": message.get_status_display(), "by": c.reviewed_by.get_username()
                        if c.reviewed_by else "", "detail": f"{message.attempts} attempt(s); {message.recipient}",
                        "ok": message.status == OutboxMessage.Status.SENT, "source": "outbox"})
        for a in self.contacts:
            log.append({"at": a.at, "method": a.get_method_display(), "outcome": a.get_outcome_display(),
                        "by": a.by.get_username(), "detail": a.note, "ok": a.outcome in ACCOUNTED_OUTCOMES,
                        "source": "manual"})
        return sorted(log, key=lambda e: e["at"] or timezone.now())

    @property
    def first_attempt_at(self):
        times = [e["at"] for e in self.attempts() if e["at"]]
        return min(times) if times else None

    @property
    def reached_entry(self):
        return next((e for e in self.attempts() if e["ok"]), None)


def message_of(correction):
    """The correction's outbox message, or None (a reverse one-to-one raises when missing)."""
    if isinstance(correction, CorrectionRow):
        return correction.message
    try:
        return correction.message
    except OutboxMessage.DoesNotExist:
        return None


def _state(line: PatientLine) -> str:
    outcomes = {a.outcome for a in line.contacts}
    statuses = {c.status for c in line.corrections}
    message_statuses = {m.status for m in map(message_of, line.corrections) if m is not None}
    Out, S, M = ContactAttempt.Outcome, Correction.Status, OutboxMessage.Status
    O = Out  # noqa: E741 (short names keep the rule table readable)
    if O.REACHED in outcomes:
        return "reached"
    if O.POSTED in outcomes or S.SENT in statuses:
        return "notified"
    if O.NOT_NEEDED in outcomes:
        return "not_needed"
    if outcomes & {O.NOT_REACHED, O.WRONG_NUMBER} or message_statuses & {M.FAILED, M.UNKNOWN}:
        return "not_reached"
    if S.APPROVED in statuses:
        return "sending"
    if S.DRAFT in statuses:
        return "awaiting_review"
    if S.REJECTED in statuses:
        return "rejected"
    return "none"


@dataclass
class PatientRow:
    """The patient columns the worklist shows (read as tuples: a recall can expose thousands)."""

    id: int
    display_name: str
    external_ref: str
    public_id: object
    preferred_channel: str
    email: str
    phone: str

    def get_preferred_channel_display(self):
        return {"sms": "SMS", "email": "Email"}.get(self.preferred_channel, self.preferred_channel)


@dataclass
class MessageRow:
    status: str
    channel: str
    recipient: str
    sent_at: datetime | None
    attempts: int

    def get_status_display(self):
        return OutboxMessage.Status(self.status).label if self.status in OutboxMessage.Status.values else self.status


@dataclass
class CorrectionRow:
    id: int
    status: str
    kind: str
    new_verdict: str
    reviewed_at: datetime | None
    reviewer: str
    message: MessageRow | None

    @property
    def reviewed_by(self):
        return SimpleNamespace(get_username=lambda: self.reviewer) if self.reviewer else None

    def get_kind_display(self):
        return Correction.Kind(self.kind).label

    def get_status_display(self):
        return Correction.Status(self.status).label


CORRECTION_COLUMNS = ["id", "patient_id", "status", "kind", "match", "new_verdict", "reviewed_at",
                      "reviewed_by__username", "message__status", "message__channel", "message__recipient",
                      "message__sent_at", "message__attempts"]
PATIENT_COLUMNS = ["id", "display_name", "external_ref", "public_id", "preferred_channel", "email", "phone"]


def _exposed_patient_ids(recall_number: str) -> dict[int, str]:
    """patient id -> strongest match class (drugs.matching, through patients.services exposure)."""
    from patients.services import exposed_patients_for_recall

    rank = {"confirmed": 0, "probable": 1, "product_all_lots": 2, "candidate": 3}
    out: dict[int, str] = {}
    for exposure in exposed_patients_for_recall(recall_number):
        klass = str(exposure.match_class) if exposure.match_class else LEGACY_MATCH_CLASS.get(exposure.match,
                                                                                             "candidate")
        known = out.get(exposure.patient.id)
        if known is None or rank.get(klass, 9) < rank.get(known, 9):
            out[exposure.patient.id] = klass
    return out


def patient_lines(recall_number: str) -> list[PatientLine]:
    """Every patient exposed to the recall (patients.services.exposure_rows) or drafted or contacted
    for it, with state. Read as tuples, not model instances, so 10,000 patients stay cheap."""
    lines: dict[int, PatientLine] = {}
    for patient_id, klass in _exposed_patient_ids(recall_number).items():
        lines[patient_id] = PatientLine(patient_id, klass)
    for row in (Correction.objects.filter(recall_number=recall_number).order_by("created", "id")
                .values_list(*CORRECTION_COLUMNS)):
        (cid, patient_id, status, kind, match, verdict, reviewed_at, reviewer, m_status, m_channel, m_recipient,
         m_sent_at, m_attempts) = row
        line = lines.get(patient_id)
        if line is None:
            line = lines[patient_id] = PatientLine(patient_id, LEGACY_MATCH_CLASS.get(match, "candidate"))
        message = MessageRow(m_status, m_channel, m_recipient, m_sent_at, m_attempts) if m_status else None
        line.corrections.append(CorrectionRow(cid, status, kind, verdict, reviewed_at, reviewer or "", message))
    for a in ContactAttempt.objects.filter(recall_number=recall_number).select_related("by"):
        line = lines.get(a.patient_id)
        if line is None:
            line = lines[a.patient_id] = PatientLine(a.patient_id, "candidate")
        line.contacts.append(a)
    for values in Patient.objects.filter(id__in=list(lines)).values_list(*PATIENT_COLUMNS):
        lines[values[0]].patient = PatientRow(*values)
    for line in lines.values():
        line.state = _state(line)
    return sorted(lines.values(), key=lambda ln: (ln.accounted, ln.patient.display_name, ln.patient.id))


@dataclass
class RecallFile:
    facts: RecallFacts
    work: RecallWork | None
    steps: dict
    lines: list
    deadline: Deadline

    @property
    def recall_number(self):
        return self.facts.recall_number

    @property
    def exposed(self):
        return len(self.lines)

    @property
    def unaccounted(self):
        return [ln for ln in self.lines if not ln.accounted]

    @property
    def not_attempted(self):
        return [ln for ln in self.lines if not ln.attempted]

    @property
    def none_found(self) -> bool:
        return bool(self.work and self.work.none_found_at)

    @property
    def closed(self) -> bool:
        return Step.CLOSE in self.steps

    def step_rows(self):
        return [(step, self.steps.get(step)) for step in STEP_ORDER]

    def by_class(self) -> dict:
        counts = {}
        for ln in self.lines:
            counts[ln.match_class] = counts.get(ln.match_class, 0) + 1
        return counts


def recall_file(recall_number: str, *, now=None) -> RecallFile:
    facts = recall_facts([recall_number]).get(recall_number, RecallFacts(recall_number))
    work = RecallWork.objects.filter(recall_number=recall_number).select_related("none_found_by").first()
    steps = {t.step: t for t in RecallTask.objects.filter(work=work).select_related("done_by")} if work else {}
    notify = steps.get(Step.NOTIFY)
    return RecallFile(facts, work, steps, patient_lines(recall_number),
                      deadline_for(facts.first_class1, notify.done_at if notify else None, now=now))


def recall_known(recall_number: str) -> bool:
    return (Fact.objects.filter(kind=Fact.Kind.RECALL, fact_key__startswith=f"recall:{recall_number}:").exists()
            or Correction.objects.filter(recall_number=recall_number).exists())


# --- follow-up queue ----------------------------------------------------------------------------


def follow_up_queue(*, now=None) -> list[tuple[str, PatientLine]]:
    """Patients of open recalls not accounted for whose first attempt is older than
    UNSAY_FOLLOW_UP_DAYS (or who were never attempted at all once the recall is N days old)."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.UNSAY_FOLLOW_UP_DAYS)
    out = []
    for row in worklist(now=now):
        if row.closed or row.none_found:
            continue
        for line in patient_lines(row.recall_number):
            if line.accounted:
                continue
            started = line.first_attempt_at or row.facts.first_notified
            if line.state == "not_reached" or (started and started <= cutoff):
                out.append((row.recall_number, line))
    return out


# --- effectiveness report -----------------------------------------------------------------------

REPORT_COLUMNS = ["recall_number", "patient_ref", "patient_name", "match_class", "state", "first_contact_at",
                  "first_contact_by", "reached_or_notified_at", "reached_or_notified_by", "attempts"]


def report(recall_number: str, *, now=None) -> dict:
    f = recall_file(recall_number, now=now)
    rows = []
    for ln in f.lines:
        log = ln.attempts()
        first = next((e for e in log if e["at"]), None)
        ok = ln.reached_entry
        rows.append({
            "recall_number": recall_number, "patient_ref": ln.patient.external_ref,
            "patient_name": ln.patient.display_name, "match_class": ln.match_class, "state": ln.state,
            "first_contact_at": first["at"].isoformat() if first else "",
            "first_contact_by": first["by"] if first else "",
            "reached_or_notified_at": ok["at"].isoformat() if ok and ok["at"] else "",
            "reached_or_notified_by": ok["by"] if ok else "", "attempts": len(log),
        })
    summary = {
        "exposed": len(rows),
        "by_class": f.by_class(),
        "contacted": sum(1 for ln in f.lines if ln.attempted),
        "reached": sum(1 for ln in f.lines if ln.state == "reached"),
        "notified": sum(1 for ln in f.lines if ln.state == "notified"),
        "not_needed": sum(1 for ln in f.lines if ln.state == "not_needed"),
        "not_reached": sum(1 for ln in f.lines if not ln.accounted),
    }
    return {"file": f, "rows": rows, "summary": summary, "columns": REPORT_COLUMNS}


# --- history and audit by patient ---------------------------------------------------------------


def sent_history(*, before_id: int | None = None, limit: int = 50):
    """Approved and sent messages, newest first, keyset-paged by correction id."""
    S = Correction.Status
    qs = (Correction.objects.filter(status__in=[S.APPROVED, S.SENT, S.REJECTED])
          .select_related("patient", "reviewed_by", "message")
          .only("public_id", "status", "recall_number", "classification", "new_verdict", "reviewed_at", "kind",
                "rejection_reason", "patient__display_name", "patient__external_ref", "patient__public_id",
                "reviewed_by__username", "message__status", "message__channel", "message__recipient",
                "message__sent_at", "message__attempts")
          .order_by("-id"))
    if before_id:
        qs = qs.filter(id__lt=before_id)
    items = list(qs[: limit + 1])
    return items[:limit], (items[limit - 1].id if len(items) > limit else None)


def patient_trail(patient) -> list[dict]:
    """Everything done for one patient: drafts, reviews, sends (corrections' audit) and worklist
    contacts, oldest first, named by patient and recall instead of row ids."""
    from corrections.models import AuditEvent

    from .models import WorkEvent

    trail = []
    for e in (AuditEvent.objects.filter(correction__patient=patient)
              .select_related("correction").order_by("at", "id")):
        trail.append({"at": e.at, "who": e.actor_label, "what": e.get_action_display(),
                      "recall": e.correction.recall_number if e.correction else "", "note": e.note,
                      "detail": f"{e.before.get('status', e.before.get('verdict', ''))} → "
                                f"{e.after.get('status', e.after.get('verdict', ''))}"})
    for e in WorkEvent.objects.filter(patient=patient).order_by("at", "id"):
        trail.append({"at": e.at, "who": e.actor_label, "what": e.get_action_display(), "recall": e.recall_number,
                      "note": e.details.get("note", ""),
                      "detail": f"{e.details.get('method', '')} {e.details.get('outcome', '')}".strip()})
    return sorted(trail, key=lambda t: t["at"])


def uncertain_scope(recall_number: str) -> dict | None:
    """What the lot parser was unsure of for this recall (recalls.lots: a lot cut by openFDA's
    truncation, a lot rejoined across a re-wrap), beside the raw text it read; None when sure."""
    from drugs.recall_terms import key_prefix

    uncertain, truncated, raw, understood = [], False, "", []
    for fact in (Fact.objects.believed().filter(kind=Fact.Kind.RECALL, fact_key__startswith=key_prefix(recall_number))
                 .only("lot", "attributes", "fact_key")):
        scope = (fact.attributes or {}).get("lot_scope") or {}
        uncertain.extend(u for u in scope.get("uncertain") or [] if u not in uncertain)
        truncated = truncated or bool(scope.get("truncated"))
        raw = raw or (fact.attributes or {}).get("code_info", "")
        if fact.lot:
            understood.append(fact.lot)
    if not uncertain and not truncated:
        return None
    return {"uncertain": uncertain, "truncated": truncated, "raw": raw, "understood": sorted(understood)}
