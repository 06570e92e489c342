"""Where each patient of one recall stands (reached, notified, not reached, awaiting review...).

The state is defined twice on purpose: in Python (`patient_lines`, the definition the workflow rules
use) and in SQL (`patient_states`, `state_counts`: what pages read at 10,000 drafts). They sit side by
side so a change to one is seen next to the other; tests/worklist/test_worklist_sql.py holds them equal."""

from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace

from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from corrections.models import Correction, OutboxMessage
from drugs.matching import CERTAINTY_RANK
from patients.models import Patient

from .exposure import exposure_classes
from .match_classes import correction_match_class, has_match_class_field
from .models import ContactAttempt

ACCOUNTED_OUTCOMES = [ContactAttempt.Outcome.REACHED, ContactAttempt.Outcome.POSTED,
                      ContactAttempt.Outcome.NOT_NEEDED]


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

    contact = Patient.contact  # where a message goes: the patient's one rule, read off these columns

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
    return f"""SELECT s.patient_id, s.klass, s.state FROM state s
    JOIN {connection.ops.quote_name(Patient._meta.db_table)} p ON p.id = s.patient_id
    ORDER BY s.state = ANY(%s), p.display_name COLLATE "C", p.id""" + (" LIMIT %s OFFSET %s" if limit_offset else "")


def patient_states(recall_number: str, classes: dict[int, str], *, offset: int = 0,
                   limit: int | None = None) -> list[tuple[int, str, str]]:
    """(patient id, match class, state) in patient_lines() order, a page at a time, from SQL."""
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
