"""Reads for the recall worklist: the list of recalls, one recall's patients and what was done for
each, the deadline, the follow-up queue and the effectiveness report. No writes here.

Why one long module: per-patient state is defined twice on purpose, in Python (`patient_lines`, the
definition the workflow rules use) and in SQL (`patient_states`, what pages read at 10,000 drafts),
side by side so a change to one is seen next to the other; tests/test_worklist_sql.py holds them equal."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from django.conf import settings
from django.db.models import Case, CharField, Count, F, Max, Min, Q, Value, When
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from corrections.models import CLASS_SEVERITY, Correction, OutboxMessage, Redecision
from drugs.matching import CERTAINTY_RANK
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
    """The correction's match class in SQL: `match_class` when the sweep recorded one, else the
    legacy mapping of `match` (rows drafted before drugs.matching carry it blank)."""
    legacy = [When(match=k, then=Value(v)) for k, v in
              ((Correction.Match.LOT, "probable"), (Correction.Match.ASKED, "asked"))]
    if has_match_class_field():
        return Case(When(~Q(match_class=""), then=F("match_class")), *legacy, default=Value("candidate"),
                    output_field=CharField())
    return Case(*legacy, default=Value("candidate"), output_field=CharField())


def correction_match_class(match_class: str, match: str) -> str:
    """Python twin of match_class_sql() for a correction read as columns."""
    return match_class or LEGACY_MATCH_CLASS.get(match, "candidate")


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


def _not_reached_by_recall() -> dict[str, int]:
    """Patients with a failed attempt (send failed or unknown, not reached, wrong number) and no
    success (reached, letter posted, message sent, no contact needed) for the same recall: the
    not_reached state of _state(), counted per recall in SQL."""
    from django.db import connection

    q = connection.ops.quote_name
    C, M, A = (q(m._meta.db_table) for m in (Correction, OutboxMessage, ContactAttempt))
    MS, O = OutboxMessage.Status, ContactAttempt.Outcome  # noqa: E741
    sql = f"""
    WITH bad AS (
        SELECT c.recall_number, c.patient_id FROM {C} c JOIN {M} m ON m.correction_id = c.id
        WHERE m.status = ANY(%s)
        UNION
        SELECT recall_number, patient_id FROM {A} WHERE outcome = ANY(%s))
    SELECT b.recall_number, count(*) FROM bad b
    WHERE NOT EXISTS (SELECT 1 FROM {A} a WHERE a.recall_number = b.recall_number AND a.patient_id = b.patient_id
                      AND a.outcome = ANY(%s))
      AND NOT EXISTS (SELECT 1 FROM {C} c WHERE c.recall_number = b.recall_number AND c.patient_id = b.patient_id
                      AND c.status = %s)
    GROUP BY b.recall_number"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [[MS.FAILED, MS.UNKNOWN], [O.NOT_REACHED, O.WRONG_NUMBER],
                             [str(o) for o in ACCOUNTED_OUTCOMES], Correction.Status.SENT])
        return dict(cursor.fetchall())


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


CORRECTION_COLUMNS = ["id", "patient_id", "status", "kind", "match", "match_class", "new_verdict", "reviewed_at",
                      "reviewed_by__username", "message__status", "message__channel", "message__recipient",
                      "message__sent_at", "message__attempts"]
PATIENT_COLUMNS = ["id", "display_name", "external_ref", "public_id", "preferred_channel", "email", "phone"]


def _exposed_patient_ids(recall_number: str) -> dict[int, str]:
    """patient id -> strongest match class, the definition: every Exposure that
    patients.services.exposed_patients_for_recall builds (model instances; the tests' reference)."""
    from patients.services import exposed_patients_for_recall

    out: dict[int, str] = {}
    for exposure in exposed_patients_for_recall(recall_number):
        klass = str(exposure.match_class) if exposure.match_class else LEGACY_MATCH_CLASS.get(exposure.match,
                                                                                             "candidate")
        known = out.get(exposure.patient.id)
        if known is None or CERTAINTY_RANK.get(klass, 9) < CERTAINTY_RANK.get(known, 9):
            out[exposure.patient.id] = klass
    return out


# drugs.matching.match() reads only these columns of a dispensing (and the day it was dispensed), so
# it is asked once per distinct combination instead of once per row: a recall with 8,000 patients
# on one lot is a handful of calls. The rule itself stays in drugs.matching.
MATCH_INPUTS = ["drug", "ndc_product", "ndc", "lot", "lot_unknown", "expiry", "day"]


def _match_groups(rows):
    from django.contrib.postgres.aggregates import ArrayAgg
    from django.db.models.functions import TruncDate

    return (rows.order_by().annotate(day=TruncDate("dispensed_at", tzinfo=UTC)).values(*MATCH_INPUTS)
            .annotate(patients=ArrayAgg("patient_id")))  # a patient may repeat: harmless


def _as_dispensing(group) -> SimpleNamespace:
    return SimpleNamespace(drug=group["drug"], ndc_product=group["ndc_product"], ndc=group["ndc"], lot=group["lot"],
                           lot_unknown=group["lot_unknown"], lot_known=not group["lot_unknown"],
                           expiry=group["expiry"], dispensed_at=group["day"])


def exposure_classes(recall_number: str) -> dict[int, str]:
    """patient id -> strongest match class over every believed fact of the recall: the same rows as
    patients.services.exposed_patients_for_recall (its exposure_rows per fact; all lots of the recall
    in one query), grouped in SQL by what drugs.matching.match() reads, match() once per group.
    tests/test_worklist_sql.py checks it equals _exposed_patient_ids on real recall data."""
    from drugs import recall_terms
    from drugs.lots import near_lot_key, near_lot_keys
    from drugs.matching import match
    from patients.models import DispensingRecord
    from patients.services import exposure_rows

    facts = list(Fact.objects.believed().filter(kind=Fact.Kind.RECALL,
                                                fact_key__startswith=recall_terms.key_prefix(recall_number))
                 .defer("embedding").order_by("fact_key"))
    out: dict[int, str] = {}

    def take(fact, groups):
        for group in groups:
            found = match(fact, _as_dispensing(group))
            if found is None:
                continue
            klass = str(found)
            for patient_id in group["patients"]:
                known = out.get(patient_id)
                if known is None or CERTAINTY_RANK[klass] < CERTAINTY_RANK[known]:
                    out[patient_id] = klass

    lot_facts = [f for f in facts if f.lot and not recall_terms.is_drug_level(f)]
    for fact in facts:
        if fact not in lot_facts:
            rows = exposure_rows(fact)
            if rows is not None:
                take(fact, _match_groups(rows))
    if lot_facts:
        # The rows exposed_patients_for_recall reads: every row with one of the recall's lots or a near
        # miss of one (any name), and the unknown-lot rows of its drugs or products.
        subjects = {f.subject for f in lot_facts if f.subject}
        products = set().union(*(recall_terms.products(f) for f in lot_facts))
        near = sorted(set().union(*(near_lot_keys(f.lot) for f in lot_facts)))
        groups = list(_match_groups(DispensingRecord.objects.filter(
            Q(lot_near__in=near, lot_unknown=False)
            | ((Q(drug__in=subjects) | Q(ndc_product__in=products)) & Q(lot_unknown=True)))))
        by_near: dict[str, list] = {}
        unknown = []
        for group in groups:
            if group["lot_unknown"]:
                unknown.append(group)
            else:
                by_near.setdefault(near_lot_key(group["lot"]), []).append(group)
        for fact in lot_facts:
            take(fact, [g for key in sorted(near_lot_keys(fact.lot)) for g in by_near.get(key, [])] + unknown)
    return out


def _lines(recall_number: str, classes: dict[int, str], patient_ids=None) -> dict[int, PatientLine]:
    """PatientLines (corrections, outbox state, manual contacts, patient columns) read as tuples;
    every patient of the recall, or only `patient_ids` (one page)."""
    lines: dict[int, PatientLine] = {}
    for patient_id, klass in classes.items():
        if patient_ids is None or patient_id in patient_ids:
            lines[patient_id] = PatientLine(patient_id, klass)
    corrections = Correction.objects.filter(recall_number=recall_number)
    contacts = ContactAttempt.objects.filter(recall_number=recall_number)
    if patient_ids is not None:
        corrections = corrections.filter(patient_id__in=patient_ids)
        contacts = contacts.filter(patient_id__in=patient_ids)
    for row in corrections.order_by("created", "id").values_list(*CORRECTION_COLUMNS):
        (cid, patient_id, status, kind, match, match_class, verdict, reviewed_at, reviewer, m_status, m_channel,
         m_recipient, m_sent_at, m_attempts) = row
        line = lines.get(patient_id)
        if line is None:
            line = lines[patient_id] = PatientLine(patient_id, correction_match_class(match_class, match))
        message = MessageRow(m_status, m_channel, m_recipient, m_sent_at, m_attempts) if m_status else None
        line.corrections.append(CorrectionRow(cid, status, kind, verdict, reviewed_at, reviewer or "", message))
    for a in contacts.select_related("by").order_by("at", "id"):
        line = lines.get(a.patient_id)
        if line is None:
            line = lines[a.patient_id] = PatientLine(a.patient_id, "candidate")
        line.contacts.append(a)
    for values in Patient.objects.filter(id__in=list(lines)).values_list(*PATIENT_COLUMNS):
        lines[values[0]].patient = PatientRow(*values)
    for line in lines.values():
        line.state = _state(line)
    return lines


def _line_order(ln):
    return (ln.accounted, ln.patient.display_name, ln.patient.id)


def patient_lines(recall_number: str, *, exposure=None) -> list[PatientLine]:
    """Every patient exposed to the recall or drafted or contacted for it, with state, in Python
    over all of them: the definition (services check their rules on it; the SQL path of
    patient_states() must agree). `exposure` defaults to exposure_classes()."""
    classes = exposure_classes(recall_number) if exposure is None else exposure
    return sorted(_lines(recall_number, classes).values(), key=_line_order)


# --- the same per-patient state in SQL: counts by GROUP BY, only the page materialised ----------

ACCOUNTED_STATES = ("reached", "notified", "not_needed")
NOT_ATTEMPTED_STATES = ("none", "awaiting_review", "rejected")


def _states_sql(recall_number: str, classes: dict[int, str]) -> tuple[str, list]:
    """A CTE `state(patient_id, klass, state, pending, first_at)`: one row per patient of the recall (exposed
    ∪ drafted ∪ contacted), its state by the rules of _state() as bool_or flags grouped per patient."""
    from django.db import connection

    S, M, O = Correction.Status, OutboxMessage.Status, ContactAttempt.Outcome  # noqa: E741
    q = connection.ops.quote_name
    # One id array per class, as literals built by str.join: adapting 8,000 Python values one by one,
    # or sending a class name beside each id, costs more than the query.
    by_class = {k: [] for k in CERTAINTY_RANK}
    for patient_id, klass in classes.items():
        by_class[klass].append(patient_id)
    arrays = ["{" + ",".join(map(str, by_class[k])) + "}" for k in CERTAINTY_RANK]
    exposed = " UNION ALL ".join(f"SELECT unnest(%s::bigint[]), '{k}'" for k in CERTAINTY_RANK)
    has_class = has_match_class_field()
    klass = ("CASE WHEN c.match_class <> '' THEN c.match_class " if has_class else "CASE ") + \
        "WHEN c.match = %s THEN 'probable' WHEN c.match = %s THEN 'asked' ELSE 'candidate' END"
    # One row per source (exposure, correction × its message, manual contact), one GROUP BY patient.
    sql = f"""
    WITH src AS (
        SELECT e.patient_id, e.klass AS e_klass, NULL::text AS c_status, NULL::text AS m_status,
               NULL::text AS outcome, NULL::timestamptz AS att_at
        FROM ({exposed}) AS e(patient_id, klass)
        UNION ALL
        SELECT c.patient_id, NULL, c.status, m.status, NULL,
               -- a send attempt in the contact log (PatientLine.attempts): reviewed, message released
               CASE WHEN c.status NOT IN (%s, %s) AND m.status NOT IN (%s, %s)
                    THEN COALESCE(m.sent_at, c.reviewed_at) END
        FROM {q(Correction._meta.db_table)} c
        LEFT JOIN {q(OutboxMessage._meta.db_table)} m ON m.correction_id = c.id
        WHERE c.recall_number = %s
        UNION ALL
        SELECT a.patient_id, NULL, NULL, NULL, a.outcome, a.at
        FROM {q(ContactAttempt._meta.db_table)} a WHERE a.recall_number = %s),
    flags AS (
        SELECT patient_id, min(e_klass) AS e_klass, bool_or(c_status IS NOT NULL) AS drafted,
               bool_or(outcome = %s) AS reached, bool_or(outcome = %s) AS posted,
               bool_or(outcome = %s) AS not_needed, bool_or(outcome IN (%s, %s)) AS bad,
               bool_or(c_status = %s) AS sent, bool_or(c_status = %s) AS approved,
               bool_or(c_status = %s) AS draft, bool_or(c_status = %s) AS rejected,
               bool_or(m_status IN (%s, %s)) AS msg_bad,
               count(*) FILTER (WHERE c_status = %s) AS pending, min(att_at) AS first_at
        FROM src GROUP BY patient_id),
    state AS (
        -- Not exposed: the class of the patient's first correction of the recall (evaluated only
        -- then: COALESCE stops at the first non-null), else a candidate.
        SELECT patient_id, COALESCE(e_klass, CASE WHEN drafted THEN (
                   SELECT {klass} FROM {q(Correction._meta.db_table)} c
                   WHERE c.patient_id = flags.patient_id AND c.recall_number = %s
                   ORDER BY c.created, c.id LIMIT 1) END, 'candidate') AS klass,
               CASE WHEN reached THEN 'reached'
                    WHEN posted OR sent THEN 'notified'
                    WHEN not_needed THEN 'not_needed'
                    WHEN bad OR msg_bad THEN 'not_reached'
                    WHEN approved THEN 'sending'
                    WHEN draft THEN 'awaiting_review'
                    WHEN rejected THEN 'rejected'
                    ELSE 'none' END AS state,
               pending, first_at
        FROM flags)
    """
    params = [*arrays, S.DRAFT, S.STALE, M.HELD, M.CANCELLED, recall_number, recall_number,
              O.REACHED, O.POSTED, O.NOT_NEEDED, O.NOT_REACHED, O.WRONG_NUMBER,
              S.SENT, S.APPROVED, S.DRAFT, S.REJECTED, M.FAILED, M.UNKNOWN, S.DRAFT,
              Correction.Match.LOT, Correction.Match.ASKED, recall_number]
    return sql, params


def _page_sql(limit_offset: bool) -> str:
    from django.db import connection

    return f"""SELECT s.patient_id, s.klass, s.state FROM state s
    JOIN {connection.ops.quote_name(Patient._meta.db_table)} p ON p.id = s.patient_id
    ORDER BY s.state = ANY(%s), p.display_name COLLATE "C", p.id""" + (" LIMIT %s OFFSET %s" if limit_offset else "")


def patient_states(recall_number: str, classes: dict[int, str], *, offset: int = 0,
                   limit: int | None = None) -> list[tuple[int, str, str]]:
    """(patient id, match class, state) in patient_lines() order, a page at a time, from SQL."""
    from django.db import connection

    sql, params = _states_sql(recall_number, classes)
    sql += _page_sql(limit is not None)
    params = [*params, list(ACCOUNTED_STATES), *([limit, offset] if limit is not None else [])]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@dataclass
class StateCounts:
    """Patients of one recall by (match class, state), from one GROUP BY; the summaries derive from it."""

    cells: dict = field(default_factory=dict)  # (klass, state) -> patients
    pending: int = 0  # drafts awaiting review

    @property
    def total(self) -> int:
        return sum(self.cells.values())

    def count(self, states) -> int:
        return sum(n for (_klass, state), n in self.cells.items() if state in states)

    def by_class(self) -> dict:
        out = {}
        for (klass, _st), n in sorted(self.cells.items(), key=lambda kv: CERTAINTY_RANK.get(kv[0][0], 9)):
            out[klass] = out.get(klass, 0) + n
        return out

    def summary(self) -> dict:
        return {"exposed": self.total, "by_class": self.by_class(),
                "contacted": self.total - self.count(NOT_ATTEMPTED_STATES),
                "reached": self.count(["reached"]), "notified": self.count(["notified"]),
                "not_needed": self.count(["not_needed"]), "not_reached": self.total - self.count(ACCOUNTED_STATES)}


def state_counts(recall_number: str, classes: dict[int, str], *, page: tuple[int, int] | None = None):
    """Counts by (class, state) from one GROUP BY; with page=(offset, limit) the same query also
    returns that page of (patient id, class, state) (the CTE is computed once). -> (counts, page)"""
    from django.db import connection

    sql, params = _states_sql(recall_number, classes)
    sql += " SELECT 0 AS part, NULL::bigint, klass, state, count(*), sum(pending) FROM state GROUP BY klass, state"
    if page is not None:
        sql += f" UNION ALL SELECT 1, * , 0, 0 FROM ({_page_sql(True)}) pg"
        params = [*params, list(ACCOUNTED_STATES), page[1], page[0]]
    counts, rows = StateCounts(), []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for part, patient_id, klass, state, n, pending in cursor.fetchall():
            if part == 0:
                counts.cells[(klass, state)] = n
                counts.pending += int(pending or 0)
            else:
                rows.append((patient_id, klass, state))
    return counts, rows


class LinePages:
    """A recall's patient lines as a lazy sequence for django.core.paginator: count() from the GROUP
    BY, a slice runs the SQL page query (or takes the page read with the counts) and materialises
    only those patients."""

    def __init__(self, recall_number: str, classes: dict[int, str], total: int, prefetched=None):
        self.recall_number, self.classes, self.total = recall_number, classes, total
        self.prefetched = prefetched or {}  # (offset, limit) -> [(patient id, class, state)]

    def count(self) -> int:
        return self.total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, item):
        if not isinstance(item, slice):
            return self[item:item + 1][0]
        start, stop = item.start or 0, min(item.stop if item.stop is not None else self.total, self.total)
        if stop <= start:
            return []
        if stop - start > 1000:  # a print of every row: one read of the whole recall
            return list(self)[start:stop]
        page = self.prefetched.get((start, stop - start))
        if page is None:
            page = patient_states(self.recall_number, self.classes, offset=start, limit=stop - start)
        return self._materialise(page)

    def _materialise(self, page):
        lines = _lines(self.recall_number, {pid: klass for pid, klass, _ in page}, {pid for pid, _, _ in page})
        return [lines[pid] for pid, _, _ in page]

    def __iter__(self):
        """Every line in order (the CSV, a print of every row): read for the whole recall at once;
        thousands of ids in an IN list cost more to send than the rows they select."""
        yield from patient_lines(self.recall_number, exposure=self.classes)


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


@dataclass
class RecallPage:
    """What the recall page and the report show: the file's header (facts, work, steps, deadline),
    counts from one GROUP BY over the per-patient state in SQL, and the patients as lazy pages."""

    facts: RecallFacts
    work: RecallWork | None
    steps: dict
    counts: StateCounts
    lines: LinePages
    deadline: Deadline

    recall_number = RecallFile.recall_number
    none_found = RecallFile.none_found
    closed = RecallFile.closed
    step_rows = RecallFile.step_rows

    @property
    def exposed(self) -> int:
        return self.counts.total

    @property
    def unaccounted_count(self) -> int:
        return self.counts.total - self.counts.count(ACCOUNTED_STATES)

    @property
    def pending(self) -> int:
        return self.counts.pending

    def by_class(self) -> dict:
        return self.counts.by_class()


def recall_page(recall_number: str, *, now=None, page: int = 1, per_page: int = 50) -> RecallPage:
    """The recall's header, its counts and (read in the same query) patients page `page`; any other
    slice of `lines` is read when asked for."""
    facts = recall_facts([recall_number]).get(recall_number, RecallFacts(recall_number))
    work = RecallWork.objects.filter(recall_number=recall_number).select_related("none_found_by").first()
    steps = {t.step: t for t in RecallTask.objects.filter(work=work).select_related("done_by")} if work else {}
    notify = steps.get(Step.NOTIFY)
    classes = exposure_classes(recall_number)
    window = ((max(page, 1) - 1) * per_page, per_page)
    counts, rows = state_counts(recall_number, classes, page=window)
    return RecallPage(facts, work, steps, counts, LinePages(recall_number, classes, counts.total,
                                                            {(window[0], len(rows)): rows} if rows else None),
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


FOLLOW_UP_SHOWN = 50  # per recall on the follow-up page, as a recall page shows 50; the recall page pages through all


def follow_up_page(*, now=None, per_recall: int = FOLLOW_UP_SHOWN) -> list[dict]:
    """follow_up_queue()'s patients from the per-patient state in SQL, per open recall: the first
    `per_recall` in its order, materialised, and how many there are in all."""
    from django.db import connection

    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.UNSAY_FOLLOW_UP_DAYS)
    out = []
    for row in worklist(now=now):
        if row.closed or row.none_found:
            continue
        classes = exposure_classes(row.recall_number)
        sql, params = _states_sql(row.recall_number, classes)
        sql += f"""
        SELECT s.patient_id, s.klass, s.state, count(*) OVER () FROM state s
        JOIN {connection.ops.quote_name(Patient._meta.db_table)} p ON p.id = s.patient_id
        WHERE NOT (s.state = ANY(%s)) AND (s.state = 'not_reached' OR COALESCE(s.first_at, %s) <= %s)
        ORDER BY p.display_name COLLATE "C", p.id LIMIT %s"""
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, list(ACCOUNTED_STATES), row.facts.first_notified, cutoff, per_recall])
            found = cursor.fetchall()
        if found:
            lines = LinePages(row.recall_number, classes, found[0][3])._materialise([r[:3] for r in found])
            out.append({"recall_number": row.recall_number, "lines": lines, "total": found[0][3]})
    return out


# --- effectiveness report -----------------------------------------------------------------------

REPORT_COLUMNS = ["recall_number", "patient_ref", "patient_name", "match_class", "state", "first_contact_at",
                  "first_contact_by", "reached_or_notified_at", "reached_or_notified_by", "attempts"]


def report_row(recall_number: str, ln: PatientLine) -> dict:
    log = ln.attempts()
    first = next((e for e in log if e["at"]), None)
    ok = next((e for e in log if e["ok"]), None)
    return {
        "recall_number": recall_number, "patient_ref": ln.patient.external_ref,
        "patient_name": ln.patient.display_name, "match_class": ln.match_class, "state": ln.state,
        "first_contact_at": first["at"].isoformat() if first else "",
        "first_contact_by": first["by"] if first else "",
        "reached_or_notified_at": ok["at"].isoformat() if ok and ok["at"] else "",
        "reached_or_notified_by": ok["by"] if ok else "", "attempts": len(log),
    }


def report(recall_number: str, *, now=None) -> dict:
    """The report computed in Python over every patient (patient_lines): the definition that
    report_page()'s SQL counts are tested against."""
    f = recall_file(recall_number, now=now)
    rows = [report_row(recall_number, ln) for ln in f.lines]
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


class ReportRows:
    """The report's rows as a lazy sequence (pages of LinePages turned into rows)."""

    def __init__(self, recall_number: str, lines: LinePages):
        self.recall_number, self.lines = recall_number, lines

    def count(self) -> int:
        return self.lines.count()

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, item):
        if not isinstance(item, slice):
            return self[item:item + 1][0]
        return [report_row(self.recall_number, ln) for ln in self.lines[item]]

    def __iter__(self):
        for ln in self.lines:
            yield report_row(self.recall_number, ln)


def report_page(recall_number: str, *, now=None, page: int = 1, per_page: int = 50) -> dict:
    """The report from the SQL path: summary from the GROUP BY, rows materialised a page at a time."""
    f = recall_page(recall_number, now=now, page=page, per_page=per_page)
    return {"file": f, "rows": ReportRows(recall_number, f.lines), "summary": f.counts.summary(),
            "columns": REPORT_COLUMNS}


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


# --- patient answers and tasks ------------------------------------------------------------------


def answers_and_tasks(recall_number: str, patient_ids) -> dict[int, dict]:
    """patient id -> {"answer": their newest answer on this recall or None, "tasks": open tasks}: two
    queries for a page of rows."""
    from .models import PatientAnswer, PatientTask

    ids = list(patient_ids)
    out = {pid: {"answer": None, "tasks": []} for pid in ids}
    for answer in PatientAnswer.objects.filter(recall_number=recall_number, patient_id__in=ids).order_by("at", "id"):
        out[answer.patient_id]["answer"] = answer
    for task in (PatientTask.objects.filter(recall_number=recall_number, patient_id__in=ids, done_at=None)
                 .select_related("answer")):
        out[task.patient_id]["tasks"].append(task)
    return out


# --- replies: did the letters work? --------------------------------------------------------------

EFFECTIVENESS_COLUMNS = ["recall_number", "notified", "delivered", "replied", "replied_stopped", "replied_returned",
                         "replied_still_have", "replied_question", "no_reply_days", "no_reply", "follow_up_tasks_open",
                         "tasks_open"]


def reply_effectiveness(recall_number: str, *, days: int | None = None, now=None) -> dict:
    """Per recall, counted in patients: notified (a letter approved and handed to the outbox), delivered
    (sent), replied by answer (their newest answer), no reply `days` after the letter was sent, and the
    open follow-up tasks (worklist.services.open_no_reply_tasks opens them)."""
    from .models import PatientAnswer, PatientTask

    days = settings.UNSAY_REPLY_FOLLOW_UP_DAYS if days is None else days
    now = now or timezone.now()
    messages = OutboxMessage.objects.filter(correction__recall_number=recall_number)
    handed = messages.exclude(status__in=[OutboxMessage.Status.HELD, OutboxMessage.Status.CANCELLED])
    notified = set(handed.values_list("correction__patient_id", flat=True))
    sent = dict(handed.filter(status=OutboxMessage.Status.SENT).values_list("correction__patient_id")
                .annotate(first=Min("sent_at")).values_list("correction__patient_id", "first"))
    newest = {}
    for patient_id, answer in (PatientAnswer.objects.filter(recall_number=recall_number).order_by("at", "id")
                               .values_list("patient_id", "answer")):
        newest[patient_id] = answer
    by_answer = {a: 0 for a in PatientAnswer.Answer.values}
    for answer in newest.values():
        by_answer[answer] += 1
    cutoff = now - timedelta(days=days)
    no_reply = sum(1 for pid, at in sent.items() if pid not in newest and at and at <= cutoff)
    tasks = PatientTask.objects.filter(recall_number=recall_number, done_at=None)
    return {
        "recall_number": recall_number, "notified": len(notified), "delivered": len(sent), "replied": len(newest),
        **{f"replied_{a}": n for a, n in by_answer.items()}, "no_reply_days": days, "no_reply": no_reply,
        "follow_up_tasks_open": tasks.filter(reason=PatientTask.Reason.NO_REPLY).count(), "tasks_open": tasks.count(),
    }


def open_patient_tasks(limit: int = 200) -> list:
    """Open patient tasks across recalls, oldest first (the follow-up queue): questions, Class I packs still
    held, letters nobody answered."""
    from .models import PatientTask

    return list(PatientTask.objects.filter(done_at=None).select_related("patient", "answer")
                .order_by("created", "id")[:limit])
