"""No patient is left exposed without a reviewed letter, property-tested.

After any sweep, for every recall we have believed active (one closed when we first learned of it
owes no letter by itself) and every patient: a patient exposed to it (patients.services exposure, the
drugs.matching rule) whom the decision logic finds affected (caution or stop) holds exactly one live
letter about it (a notice or a correction, draft, approved or sent), whether or not they asked in the
app; nobody else holds a pending notice about it. Hypothesis drives random sequences of recall changes
(lots published and dropped, escalations, terminations, re-openings, withdrawals), dispensing
registered, corrected and deleted, and patients asking in the app; the after-commit triggers run
their scoped sweeps in process, as a worker would, and a periodic sweep is a step of its own.

Recall facts are written the way ingestion writes them, from REAL openFDA records
(recalls.ingest.parse_enforcement, then recall_claims): D-0326-2019 (Mylan valsartan, lots 3069019-21),
D-0968-2018 (Solco valsartan, every lot: drug level) and D-1300-2020 (Acella NP Thyroid, lots
M331J18-1 and M331J18-2 among others). What varies is a record's classification, status and which of
its real lots it lists, as openFDA amendments do. Patients and dispensing are synthetic; a thyroid
pack typed "M331J18" (the recall's suffix left off) may be either of two listed lots.
"""

from collections import Counter
from contextlib import nullcontext
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from django.db import connection
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ask.services import ask, decide
from corrections import tasks
from corrections.models import Correction
from corrections.sweep.run import count_stale, sweep
from corrections.triggers import auto_sweep_suppressed
from drugs.recall_terms import CLOSED_STATUSES, key_prefix
from memory.fact_writes import assert_claims, retract_claim
from memory.models import Fact
from outbox import tasks as outbox_tasks
from patients.dispensing import delete_dispensing, save_dispensing
from patients.models import DispensingRecord, Patient
from patients.services import exposed_patients_for_recall
from recalls.ingest import parse_enforcement, recall_claims
from tests.factories import make_patient, openfda_record

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RECALLS = {  # recall -> (drug, real lots it may list (none: drug level), the day it closes when terminated)
    "D-0326-2019": ("valsartan", ["3069019", "3069020", "3069021"], "20200101"),
    # Closed before the packs below were dispensed: a drug-level recall then no longer reaches them
    # (the stock had been removed), though exposure still lists them.
    "D-0968-2018": ("valsartan", [], "20200101"),
    "D-1300-2020": ("thyroid", ["M331J18-1", "M331J18-2", "M331G18-1"], "20210101"),
}
PACKS = [  # (drug, lot as typed or None for an unrecorded lot, NDC)
    ("valsartan", "3069020", "00378-5814-77"),   # the recall's own product and lot
    ("valsartan", "03069020", ""),               # a near miss with a leading zero
    ("valsartan", "ZZ-SYN-1", ""),               # a lot no recall names
    ("valsartan", None, ""),                     # lot not recorded: a candidate
    ("thyroid", "M331J18", "42192-0331-01"),     # near both M331J18-1 and M331J18-2
    ("thyroid", "M331J18-1", "42192-0331-01"),
    ("thyroid", "ZZ-SYN-2", ""),
]
PATIENTS = ["SYN-L0", "SYN-L1", "SYN-L2"]
DISPENSED_AT = datetime(2020, 3, 1, 11, 0, tzinfo=UTC)
LIVE = ("draft", "approved", "sent")

publish = st.tuples(st.just("publish"), st.sampled_from(sorted(RECALLS)), st.sets(st.integers(0, 2), min_size=1),
                    st.sampled_from(["Class I", "Class II", "Class III"]), st.sampled_from(["Ongoing", "Terminated"]),
                    st.booleans())
withdraw = st.tuples(st.just("withdraw"), st.sampled_from(sorted(RECALLS)))
dispense = st.tuples(st.just("dispense"), st.sampled_from(PATIENTS), st.integers(0, len(PACKS) - 1))
edit = st.tuples(st.just("edit"), st.sampled_from(PATIENTS), st.integers(0, len(PACKS) - 1))
remove = st.tuples(st.just("remove"), st.sampled_from(PATIENTS))
asking = st.tuples(st.just("ask"), st.sampled_from(PATIENTS), st.sampled_from(["valsartan", "thyroid"]))
sweeping = st.tuples(st.just("sweep"))
steps = st.lists(st.one_of(publish, withdraw, dispense, edit, remove, asking, sweeping), min_size=3, max_size=12)


@pytest.fixture
def triggers_run_inline(monkeypatch, hashing_embeddings):
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", True)
    monkeypatch.setattr(tasks.sweep_facts, "delay", lambda ids, helper=False: tasks.sweep_facts(ids, helper=helper))
    monkeypatch.setattr(tasks.sweep_patients, "delay", lambda ids: tasks.sweep_patients(ids))
    monkeypatch.setattr(outbox_tasks.dispatch_outbox, "delay", lambda *a, **k: None)


def _reset():
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE corrections_auditevent, corrections_redecision, corrections_outboxmessage, "
                       "corrections_correction, corrections_sweeprange, corrections_sweeprun, memory_readsetmember, "
                       "memory_readset, memory_premisesetmember, memory_premiseset, "
                       "memory_decisioninput, memory_decision, memory_fact, "
                       "patients_dispensingchange, patients_dispensingrecord, patients_patient CASCADE")
    for ref in PATIENTS:
        make_patient(ref, phone="")


def _publish(recall_number, lot_indexes, classification, status, quiet=False):
    raw = dict(openfda_record(recall_number), classification=classification, status=status,
               termination_date=RECALLS[recall_number][2] if status == "Terminated" else "")
    parsed = parse_enforcement(raw)
    lots = RECALLS[recall_number][1]
    if lots:  # a lot-level recall listing some of its real lots
        parsed = replace(parsed, lots=[lots[i] for i in sorted(lot_indexes)], all_lots=False)
    claims = recall_claims(parsed, subject=parsed.subject, ndcs=parsed.ndcs)
    keys = {c.fact_key for c in claims}
    # quiet: its sweep never ran (a broker down): the next periodic sweep finds what changed, and
    # patients may ask in between.
    with auto_sweep_suppressed() if quiet else nullcontext():
        assert_claims(claims)
        for fact in Fact.objects.believed().filter(fact_key__startswith=key_prefix(recall_number)).exclude(
                fact_key__in=keys):
            retract_claim(fact.fact_key, reason="lot no longer listed (test amendment)")


def _pack(row, index):
    drug, lot, ndc = PACKS[index]
    row.drug, row.drug_text, row.ndc = drug, drug, ndc
    row.lot, row.lot_unknown = (lot or ""), lot is None
    return row


def _apply(step):
    kind = step[0]
    if kind == "publish":
        _publish(*step[1:])
    elif kind == "withdraw":
        for fact in Fact.objects.believed().filter(fact_key__startswith=key_prefix(step[1])):
            retract_claim(fact.fact_key, reason="withdrawn (test)")
    elif kind in ("dispense", "edit"):
        patient = Patient.objects.get(external_ref=step[1])
        row = patient.dispensings.order_by("id").first() if kind == "edit" else None
        if row is None:
            row = DispensingRecord(patient=patient, synthetic=True, dispensed_at=DISPENSED_AT)
        save_dispensing(_pack(row, step[2]), actor="test")
    elif kind == "remove":
        row = DispensingRecord.objects.filter(patient__external_ref=step[1]).order_by("id").first()
        if row is not None:
            delete_dispensing(row, actor="test")
    elif kind == "ask":
        patient = Patient.objects.get(external_ref=step[1])
        if patient.dispensings.filter(drug=step[2]).exists():
            ask(patient, f"Is my {step[2]} safe?", subject=step[2])
    elif kind == "sweep":
        sweep()
        assert count_stale() == 0


def _believed_active_once(recall_number) -> bool:
    statuses = Fact.objects.filter(fact_key__startswith=key_prefix(recall_number)).values_list(
        "attributes__status", flat=True)
    return any(status not in CLOSED_STATUSES for status in statuses)


def _check_every_exposed_patient_holds_one_letter(step):
    for recall_number, (drug, _lots, _closes) in RECALLS.items():
        exposed = {e.patient.id for e in exposed_patients_for_recall(recall_number)}
        owed = _believed_active_once(recall_number)
        live = Counter(Correction.objects.filter(recall_number=recall_number, status__in=LIVE)
                       .values_list("patient_id", flat=True))
        pending_notices = set(Correction.objects.filter(recall_number=recall_number, kind="notice",
                                                        status__in=["draft", "approved"])
                              .values_list("patient_id", flat=True))
        # A pending notice says what is believed now: a superseded or withdrawn version is never sent.
        for notice in Correction.objects.filter(recall_number=recall_number, kind="notice",
                                                status__in=["draft", "approved"]):
            named = {entry["fact"] for entry in notice.matched_lots} | {notice.trigger_fact_id}
            assert not Fact.objects.filter(id__in=named, retracted_at__isnull=False).exists(), (step, notice.pk)
        for patient in Patient.objects.all():
            affected = owed and patient.id in exposed and \
                decide(patient, f"Is my {drug} safe?", subject=drug).verdict in ("caution", "stop")
            if affected:
                assert live[patient.id] == 1, (step, recall_number, patient.external_ref, live[patient.id])
            else:
                assert patient.id not in pending_notices, (step, recall_number, patient.external_ref)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(steps)
# The stories the checks were written for, always run: asked while the notice was pending, then the
# recall closed; asked, then an escalation that moves no answer (a drug-level recall); one pack near
# two lots of a recall, one lot published after the other; a lot dropped from the recall and restored;
# dispensing registered after a recall was closed; asked after a recall, before any sweep of it.
@example([("dispense", "SYN-L0", 0), ("publish", "D-0326-2019", {1}, "Class I", "Ongoing"),
          ("ask", "SYN-L0", "valsartan"), ("publish", "D-0326-2019", {1}, "Class I", "Terminated")])
@example([("dispense", "SYN-L1", 3), ("publish", "D-0968-2018", {0}, "Class II", "Ongoing"),
          ("ask", "SYN-L1", "valsartan"), ("publish", "D-0968-2018", {0}, "Class I", "Ongoing")])
@example([("dispense", "SYN-L2", 4), ("publish", "D-1300-2020", {0}, "Class I", "Ongoing"),
          ("publish", "D-1300-2020", {0, 1}, "Class I", "Ongoing"), ("ask", "SYN-L2", "thyroid"),
          ("publish", "D-1300-2020", {1}, "Class I", "Ongoing"), ("sweep",),
          ("publish", "D-1300-2020", {0, 1}, "Class II", "Terminated")])
@example([("publish", "D-0326-2019", {1}, "Class II", "Ongoing"), ("publish", "D-0326-2019", {1}, "Class II",
                                                                   "Terminated"),
          ("dispense", "SYN-L0", 1), ("edit", "SYN-L0", 5), ("withdraw", "D-0326-2019"), ("sweep",)])
@example([("dispense", "SYN-L0", 0), ("dispense", "SYN-L1", 0), ("ask", "SYN-L1", "valsartan"),
          ("publish", "D-0326-2019", {1}, "Class II", "Ongoing", True), ("ask", "SYN-L0", "valsartan"), ("sweep",),
          ("remove", "SYN-L1")])
def test_after_any_sweep_every_exposed_patient_holds_exactly_one_letter_per_recall(triggers_run_inline, sequence):
    _reset()
    quiet = False  # a change whose sweep has not run yet: checked after the next periodic sweep
    for step in [*sequence, ("sweep",)]:
        _apply(step)
        quiet = (quiet or (step[0] == "publish" and step[-1] is True)) and step[0] != "sweep"
        if not quiet:
            _check_every_exposed_patient_holds_one_letter(step)
