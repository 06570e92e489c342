"""The set-based sweep page (corrections.sweep.pages) writes exactly the rows the per-decision path
writes, ids included, on the same data: real openFDA recall facts (tests/factories.py, built by the ingestion code),
synthetic patients.

The world is built twice from empty tables with their sequences restarted, so every id before the
sweep is equal; then it is swept per decision (UNSAY_SWEEP_SET_BASED=0) the first time and set-based
the second. Every row of every table the sweep writes is compared, timestamps and public ids (uuid4)
aside. The changes cover the three stale branches: an escalation (retracted read), a dispensing
edit (dispensing changed) and a brand-new recall of a lot patients hold (new fact), with patients who
share inputs (one reasoner call), several decisions per patient (coalesced letters), SMS and email,
an unrecorded lot, and a second sweep whose pages hold undelivered drafts (those pages fall back).
"""

from datetime import UTC, datetime

import pytest
from django.db import connection

from ask.services import ask
from core.audit_verify import verify_chain
from core.models import AuditLink
from corrections.models import Correction
from corrections.sweep.run import sweep
from corrections.triggers import auto_sweep_suppressed
from memory.fact_writes import assert_claim
from patients.dispensing import save_dispensing
from patients.models import DispensingRecord, Patient
from tests.factories import recall_claim

pytestmark = pytest.mark.django_db(transaction=True)

DRUG = "Valsartan Tablets USP 40 mg"
RECALL, LOT = "D-0315-2019", "3061169"          # real: Class II, Mylan valsartan
OTHER_RECALL, OTHER_LOT = "D-0324-2019", "3063780"
NEW_RECALL, NEW_LOT = "D-0326-2019", "3069020"  # real; asserted only after the patients asked
UNAFFECTED = "3095511"
TABLES = ["memory_decision", "memory_readset", "memory_readsetmember", "memory_premiseset",
          "memory_premisesetmember", "memory_decisioninput",
          "corrections_correction", "corrections_outboxmessage", "corrections_auditevent",
          "corrections_redecision", "corrections_sweeprun", "memory_fact"]
# Audit hashes cover each event's time, which differs between the two runs (times are compared as
# "<time>"); each run's chain is verified instead.
SKIPPED = {"public_id"}


def _patient(ref, lots, channel="email"):
    patient = Patient.objects.create(region="aws-us-east-1", display_name=f"Synthetic {ref}", external_ref=ref,
                                     email=f"{ref.lower()}@example.com", phone="+15555550100",
                                     preferred_channel=channel, synthetic=True)
    for lot in lots:
        DispensingRecord.objects.create(patient=patient, drug=DRUG, lot=lot or "", lot_unknown=not lot,
                                        synthetic=True, dispensed_at=datetime(2019, 1, 5, tzinfo=UTC))
    return patient


def _restart():
    tables = [t for t in connection.introspection.django_table_names(only_existing=True)
              if not t.startswith(("django_", "auth_"))]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")


def _story(page_size: int) -> list:
    """Build the world, change it three ways, sweep twice. Returns the two sweep reports."""
    _restart()
    with auto_sweep_suppressed():
        assert_claim(recall_claim(RECALL, LOT))
        assert_claim(recall_claim(OTHER_RECALL, OTHER_LOT))
        people = [
            _patient("SYN-01", [LOT]), _patient("SYN-02", [LOT], "sms"), _patient("SYN-03", [LOT]),
            _patient("SYN-04", [OTHER_LOT]), _patient("SYN-05", [OTHER_LOT, NEW_LOT]),
            _patient("SYN-06", [UNAFFECTED]), _patient("SYN-07", [None]), _patient("SYN-08", [LOT, OTHER_LOT]),
            _patient("SYN-09", [NEW_LOT], "sms"), _patient("SYN-10", [NEW_LOT]), _patient("SYN-11", [UNAFFECTED]),
        ]
        for n, patient in enumerate(people):
            ask(patient, "Is my valsartan safe?")
            if n % 3 == 0:
                ask(patient, "Has my valsartan been recalled?")
        reports = []
        assert_claim(recall_claim(RECALL, LOT, classification="Class I"), reason="escalated to Class I")
        row = DispensingRecord.objects.get(patient=people[5])
        row.lot = OTHER_LOT
        save_dispensing(row, actor="test")
        reports.append(sweep(page_size=page_size))
        assert_claim(recall_claim(NEW_RECALL, NEW_LOT))
        assert_claim(recall_claim(OTHER_RECALL, OTHER_LOT, classification="Class I"), reason="escalated")
        reports.append(sweep(page_size=page_size))
    return reports


def _rows() -> dict:
    found = {}
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"SELECT * FROM {table} ORDER BY id")
            names = [c.name for c in cursor.description]
            found[table] = [
                {name: ("<time>" if isinstance(value, datetime) else value)
                 for name, value in zip(names, row, strict=True) if name not in SKIPPED}
                for row in cursor.fetchall()]
    return found


def _summary(reports):
    return [(r.examined, r.corrected, r.reaffirmed, r.notices, r.already_handled, r.reasoner_calls, r.errors)
            for r in reports]


def test_the_set_based_page_writes_exactly_the_rows_of_the_per_decision_path(hashing_embeddings, monkeypatch):
    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_SET_BASED", False)
    per_decision = _story(page_size=3)
    expected = _rows()
    assert verify_chain().ok
    assert sum(r.set_pages for r in per_decision) == 0

    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_SET_BASED", True)
    set_based = _story(page_size=3)
    got = _rows()
    chain = verify_chain()
    assert chain.ok, chain
    assert AuditLink.objects.filter(event_table="corrections_auditevent").count() == len(got["corrections_auditevent"])

    # The story exercises what it claims: letters, coalescing, shared inputs, reaffirmations.
    assert sum(r.set_pages for r in set_based) >= 2
    assert Correction.objects.filter(kind="correction").count() >= 4
    assert any(r["shared"] for r in got["corrections_redecision"])
    assert any(r["outcome"] == "reaffirmed" for r in got["corrections_redecision"])
    # Every row alike but one figure: the set path runs the reasoner once per group of the sweep
    # (PageDecider), the per-decision path once per distinct inputs of a page, so it may run it less.
    assert [s[:5] + s[6:] for s in _summary(set_based)] == [s[:5] + s[6:] for s in _summary(per_decision)]
    assert all(mine[5] <= theirs[5] for mine, theirs in zip(_summary(set_based), _summary(per_decision), strict=True))
    for table in TABLES:
        assert len(got[table]) == len(expected[table]), table
        for mine, theirs in zip(got[table], expected[table], strict=True):
            if table == "corrections_sweeprun":
                assert mine.pop("reasoner_calls") <= theirs.pop("reasoner_calls")
            assert mine == theirs, table


QUESTIONS = ["Is my valsartan safe?", "Has my valsartan been recalled?", "Is my lisinopril safe?",
             "Is my medicine safe?", "asdf"]


def _outcome(o):
    return (o.verdict, o.answer, o.reasoner, o.subject, [(r.fact.id, r.score, r.match) for r in o.retrieved],
            sorted(o.load_bearing_ids), o.reasoner_verdict, o.guardrail_override, o.inputs_hash, o.patient_lots,
            o.premises, o.inputs)


def test_decide_gives_the_same_outcome_from_the_database_and_from_a_page(hashing_embeddings, monkeypatch):
    """ask.services.decide over DbBeliefs (ask) and over PageBeliefs (a sweep page) on the same data:
    exact matches, a drug the patient has none of (semantic neighbours fill the list), a question
    with no drug named, nonsense, an explicit subject, an unrecorded lot, two drugs."""
    from ask.beliefs import PageBeliefs
    from ask.services import decide, resolve_subject

    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    with auto_sweep_suppressed():
        assert_claim(recall_claim(RECALL, LOT, classification="Class I"))
        assert_claim(recall_claim(OTHER_RECALL, OTHER_LOT))
        assert_claim(recall_claim(NEW_RECALL, NEW_LOT))
        people = [_patient("SYN-21", [LOT]), _patient("SYN-22", [OTHER_LOT, NEW_LOT]), _patient("SYN-23", [None]),
                  _patient("SYN-24", [UNAFFECTED]), _patient("SYN-25", [])]
        DispensingRecord.objects.create(patient=people[3], drug="Lisinopril Tablets 10 mg", lot="X1", synthetic=True,
                                        dispensed_at=datetime(2020, 3, 1, tzinfo=UTC))
    asked = [(p, q, s) for p in people for q in QUESTIONS for s in (None, "valsartan")]
    page = PageBeliefs({p.pk for p in people})
    page.load_facts([(p.pk, resolve_subject(p, q, s, beliefs=page)[0]) for p, q, s in asked])
    compared = set()
    for patient, question, subject in asked:
        from_db = decide(patient, question, subject=subject)
        from_page = decide(patient, question, subject=subject, beliefs=page)
        assert _outcome(from_page) == _outcome(from_db), (patient.external_ref, question, subject)
        compared.add(from_db.verdict)
    assert {"stop", "caution", "safe", "unknown"} <= compared


def _grouped_against_plain(people, questions, *, subjects=(None, "valsartan")):
    """Every (patient, question, subject) decided through a set-based page's PageDecider and by plain
    ask.services.decide over the database: the outcomes must be equal field by field."""
    from ask.beliefs import PageBeliefs
    from ask.services import decide, resolve_subject
    from corrections.sweep.decider import SharedDecider
    from corrections.sweep.groups import PageDecider

    asked = [(p, q, s) for p in people for q in questions for s in subjects]
    page = PageBeliefs({p.pk for p in people})
    page.load_facts([(p.pk, resolve_subject(p, q, s, beliefs=page)[0]) for p, q, s in asked])
    decider = SharedDecider()
    decider.preload_from(page)
    grouped = PageDecider(decider, page)
    outcomes = {}
    for patient, question, asked_about in asked:
        # A standing decision stores the subject it was decided about; the sweep re-decides with it.
        subject = decide(patient, question, subject=asked_about).subject
        mine, _shared, _group = grouped.decide(patient, question, subject)
        plain = decide(patient, question, subject=subject or None)
        assert _outcome(mine) == _outcome(plain), (patient.external_ref, question, subject)
        outcomes[(patient.external_ref, question, subject)] = plain
    return grouped, outcomes


def test_grouped_decisions_equal_plain_decisions_lot_by_lot(hashing_embeddings, monkeypatch):
    """PageDecider groups decisions that differ only in lots no believed fact names (inert lots).
    Cases: two lots of the same product, one recalled and one not; a recalled lot beside an inert
    one; inert lots sorted before and after a known lot; one inert lot alone (the "safe" answer
    names it); unrecorded lots (candidates, never grouped as inert); name-only matches (no NDC on
    the dispensing); two patients with the same inert lot; a drug-level recall of the drug."""
    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    with auto_sweep_suppressed():
        assert_claim(recall_claim(RECALL, LOT))
        assert_claim(recall_claim(OTHER_RECALL, OTHER_LOT, classification="Class I"))
        people = [
            _patient("SYN-31", [LOT, "BX0000001"]), _patient("SYN-32", [LOT, "BX0000002"]),
            _patient("SYN-33", [LOT, OTHER_LOT]), _patient("SYN-34", [OTHER_LOT, "BX0000003"]),
            _patient("SYN-35", ["BX0000004"]), _patient("SYN-36", ["0000005"]), _patient("SYN-37", ["BX0000004"]),
            _patient("SYN-38", ["0000006", UNAFFECTED]), _patient("SYN-39", [UNAFFECTED, "ZZ00007"]),
            _patient("SYN-40", [None]), _patient("SYN-41", [None, "BX0000008"]),
            _patient("SYN-42", [None, "BX0000009"]),
            _patient("SYN-43", [UNAFFECTED]), _patient("SYN-44", [LOT]),
        ]
    questions = ["Is my valsartan safe?", "Has my valsartan been recalled?"]
    grouped, outcomes = _grouped_against_plain(people, questions)
    # Grouping happened (fewer first members than decisions), and never across a recalled lot.
    assert grouped.groups_decided < len(outcomes) and grouped.stamped >= 6
    for (ref, _q, _s), o in outcomes.items():
        if ref in ("SYN-31", "SYN-32", "SYN-33", "SYN-44"):
            assert o.verdict == "caution" or o.verdict == "stop", (ref, o.verdict)
        if ref in ("SYN-33", "SYN-34"):
            assert o.verdict == "stop", (ref, o.verdict)  # a Class I lot they received is never "safe"
        if ref in ("SYN-35", "SYN-36", "SYN-43"):
            assert o.verdict == "safe" and all(lot in o.answer for lot in o.patient_lots), (ref, o.answer)
        if ref in ("SYN-40", "SYN-41", "SYN-42"):
            assert o.verdict == "caution", (ref, o.verdict)  # an unrecorded lot is a candidate, never safe

    # A drug-level recall of the drug (no lot): applies to every dispensing of it (name only). No real
    # Mylan valsartan recall covers all lots, so this is real D-0326-2019 with only its code_info changed.
    with auto_sweep_suppressed():
        assert_claim(recall_claim(NEW_RECALL, None, code_info="All lots within expiry."))
    grouped, outcomes = _grouped_against_plain(people, questions[:1])
    assert grouped.groups_decided < len(outcomes) and grouped.stamped >= 3
    assert {o.verdict for o in outcomes.values()} <= {"caution", "stop"}


def test_a_sweep_page_runs_with_the_cyclic_collector_paused(hashing_embeddings, monkeypatch):
    """Its objects die by reference count; the collector's walks of the whole process were a sixth to
    a quarter of the sweep's Python CPU (core.gc_pause)."""
    import gc

    from corrections.sweep import pages

    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    seen = []
    real = pages.write_page
    monkeypatch.setattr(pages, "write_page", lambda *a, **k: (seen.append(gc.isenabled()), real(*a, **k))[1])
    was = gc.isenabled()
    gc.enable()
    try:
        reports = _story(page_size=3)
        assert sum(r.set_pages for r in reports) == len(seen) >= 2
        assert not any(seen) and gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def _escalation_sweep_queries(patients: int) -> tuple[int, object]:
    """Queries of one set-based sweep page that re-decides `patients` decisions of one escalation."""
    from django.test.utils import CaptureQueriesContext

    _restart()
    assert_claim(recall_claim(RECALL, LOT, classification="Class II"))
    for n in range(patients):
        ask(_patient(f"SYN-Q{n}", [LOT]), "is my valsartan safe?", subject=DRUG)
    with auto_sweep_suppressed():
        changed = assert_claim(recall_claim(RECALL, LOT, classification="Class I"))
    with CaptureQueriesContext(connection) as queries:
        report = sweep(fact_ids=[changed.previous.id, changed.fact.id], page_size=100)
    return len(queries), report


def test_a_set_based_page_costs_the_same_queries_whatever_its_size(hashing_embeddings, monkeypatch):
    """A page reads its inputs in a handful of queries: nothing per decision (for instance a field the
    page query defers, corrections.sweep.stale_page._PAGE_UNREAD, read back one decision at a time)."""
    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    few, few_report = _escalation_sweep_queries(2)
    many, many_report = _escalation_sweep_queries(12)
    assert (few_report.corrected, many_report.corrected) == (2, 12)
    assert few_report.set_pages == many_report.set_pages == 1
    assert many == few


def test_a_sweep_page_runs_without_parallel_workers(hashing_embeddings, monkeypatch):
    """A page's queries are small; parallel workers are new server processes on the sweeps' cores."""
    from corrections.sweep import pages

    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    seen = []
    real = pages.write_page

    def write_page(*args, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SHOW max_parallel_workers_per_gather")
            seen.append(cursor.fetchone()[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(pages, "write_page", write_page)
    _escalation_sweep_queries(3)
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        outside = cursor.fetchone()[0]
    assert seen == ["0"] and outside != "0"
