"""A sweep decides once for patients whose fill and expiry dates the rules cannot tell apart
(ask.rules.date_view), and never across a date boundary a believed recall draws.

Real records: D-1113-2018 (Camber valsartan 40 mg, every lot expiring 7/2018 to 6/2020, ongoing) and
D-0587-2020 (fentanyl/bupivacaine/morphine, every lot filled and dispensed 26-29 Aug 2019, expiry from
3 Sep 2019; terminated 1 Dec 2020). Patients and their dispensing are synthetic.
"""

import ast
from datetime import UTC, date, datetime

import pytest

from ask.beliefs import PageBeliefs
from ask.services import ask, decide, resolve_subject
from corrections.sweep.decider import SharedDecider
from corrections.sweep.run import sweep
from corrections.triggers import auto_sweep_suppressed
from memory.fact_writes import assert_claim
from memory.models import Decision
from patients.models import DispensingRecord, Patient
from patients.selectors import attach_patients
from tests.factories import recall_claim
from tests.paths import PROJECT_DIR

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = PROJECT_DIR
VALSARTAN = "Valsartan Tablets USP 40 mg"
COMPOUNDED = "Fentanyl Citrate and Bupivacaine HCl and Morphine Sulfate"
QUESTION = "Is my medicine safe?"


def _at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(hour=9 + len(day) % 7, tzinfo=UTC)


def _patient(ref: str, drug: str, dispensed: str, expiry: str | None, lot: str) -> Patient:
    patient = Patient.objects.create(region="aws-us-east-1", display_name=f"Synthetic {ref}", external_ref=ref,
                                     email=f"{ref.lower()}@example.com", preferred_channel="email", synthetic=True)
    DispensingRecord.objects.create(patient=patient, drug=drug, lot=lot, synthetic=True, dispensed_at=_at(dispensed),
                                    expiry=date.fromisoformat(expiry) if expiry else None)
    return patient


# (ref, drug, dispensed, expiry, lot): fill times all differ; expiries inside, at the edges of and outside
# the valsartan window; fills inside and outside the compounded recall's dispensing window and after it closed.
PEOPLE = [
    ("SYN-D01", VALSARTAN, "2019-02-01", "2019-05-31", "VA1001"),
    ("SYN-D02", VALSARTAN, "2019-02-14", "2019-11-30", "VA1002"),
    ("SYN-D03", VALSARTAN, "2019-03-03", "2018-07-01", "VA1003"),   # first day of the window
    ("SYN-D04", VALSARTAN, "2019-04-20", "2020-06-30", "VA1004"),   # last day of the window
    ("SYN-D05", VALSARTAN, "2019-05-05", "2020-07-01", "VA1005"),   # a day after it
    ("SYN-D06", VALSARTAN, "2019-06-06", "2021-01-31", "VA1006"),
    ("SYN-D07", VALSARTAN, "2019-07-07", "2018-06-30", "VA1007"),   # a day before it
    ("SYN-D08", VALSARTAN, "2019-08-08", None, "VA1008"),           # expiry not recorded: stays in
    ("SYN-D09", COMPOUNDED, "2019-08-26", "2019-10-01", "CP01"),
    ("SYN-D10", COMPOUNDED, "2019-08-29", "2019-10-15", "CP02"),
    ("SYN-D11", COMPOUNDED, "2019-08-20", "2019-10-01", "CP03"),    # before the dispensing window
    ("SYN-D12", COMPOUNDED, "2020-11-30", "2021-03-01", "CP04"),    # inside, closed a day later
    ("SYN-D13", COMPOUNDED, "2020-12-02", "2021-03-01", "CP05"),    # after the recall closed
    ("SYN-D14", COMPOUNDED, "2021-02-01", "2021-06-01", "CP06"),
]


def _world():
    with auto_sweep_suppressed():
        assert_claim(recall_claim("D-1113-2018"))
        assert_claim(recall_claim("D-0587-2020"))
        return [_patient(*row) for row in PEOPLE]


def _outcome(o) -> tuple:
    return (o.verdict, o.answer, o.reasoner, o.subject, [(r.fact.id, r.score, r.match) for r in o.retrieved],
            sorted(o.load_bearing_ids), o.reasoner_verdict, o.guardrail_override, o.inputs_hash, o.patient_lots,
            o.premises, o.inputs)


def test_grouped_by_date_view_equals_plain_decisions(hashing_embeddings, monkeypatch):
    from corrections.sweep.groups import PageDecider

    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    people = _world()
    page = PageBeliefs({p.pk for p in people})
    page.load_facts([(p.pk, resolve_subject(p, QUESTION, None, beliefs=page)[0]) for p in people])
    decider = SharedDecider()
    decider.preload_from(page)
    grouped = PageDecider(decider, page)
    verdicts, groups = {}, {}
    for patient in people:
        subject = decide(patient, QUESTION).subject
        mine, _shared, group = grouped.decide(patient, QUESTION, subject)
        plain = decide(patient, QUESTION, subject=subject)
        assert _outcome(mine) == _outcome(plain), patient.external_ref
        verdicts[patient.external_ref] = plain.verdict
        groups.setdefault(group, set()).add(plain.verdict)
    # The dates matter here: the same drug gets different verdicts on either side of a boundary ...
    assert verdicts["SYN-D03"] != "safe" and verdicts["SYN-D04"] != "safe" and verdicts["SYN-D08"] != "safe"
    assert verdicts["SYN-D05"] == verdicts["SYN-D07"] == "safe", verdicts
    assert verdicts["SYN-D09"] != "safe" and verdicts["SYN-D12"] != "safe", verdicts
    assert verdicts["SYN-D11"] == verdicts["SYN-D13"] == "safe", verdicts
    # ... and no group spans one, while patients on the same side share their group's decision.
    assert all(len(found) == 1 for key, found in groups.items() if key is not None), groups
    assert grouped.stamped >= 5 and grouped.groups_decided <= len(people) - 5, (grouped.groups_decided, grouped.stamped)


def test_a_sweep_re_decides_once_per_date_view_and_every_verdict_is_fresh(hashing_embeddings, monkeypatch):
    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    people = _world()
    for patient in people:
        ask(patient, QUESTION)
    with auto_sweep_suppressed():
        assert_claim(recall_claim("D-1113-2018", classification="Class I"), reason="escalated to Class I")
    run = sweep()
    assert run.errors == 0
    valsartan = [p for p in people if p.external_ref <= "SYN-D08"]
    assert run.examined == len(valsartan)
    # 8 valsartan patients, every fill time different, three date views: in, out, expiry unknown (an answer
    # may not say the window includes a pack with no expiry on record, so that one is decided apart).
    assert run.reasoner_calls <= 6, run.reasoner_calls
    for decision in attach_patients(Decision.objects.filter(status=Decision.Status.STANDING)):
        fresh = decide(decision.patient, decision.question, subject=decision.subject or None)
        assert (decision.verdict, decision.answer) == (fresh.verdict, fresh.answer), decision.patient.external_ref


def test_the_rules_read_dispensing_dates_only_where_date_view_asks_them():
    """date_view is sound only while every date comparison of the rules goes through the
    predicates it calls: a new read of a dispensing's dates elsewhere in ask/ or drugs/ fails here."""
    allowed = {("drugs/matching.py", "within_lot_scope"), ("drugs/matching.py", "window_date_on_record"),
               ("ask/rules.py", "dispensed_before_closure"),
               ("ask/rules.py", "match"),  # match: the exact-row cache key, no comparison
               ("ask/beliefs.py", "__post_init__"),  # the row's dates copied into its Dispensed, no comparison
               # reading an expiry written in a lot field as it is entered, before there is a dispensing to judge
               ("drugs/lot_field.py", "read_lot_field"), ("drugs/lot_field.py", "_gs1"),
               # check my pack: the pack's printed or scanned expiry copied into the row it is held as, no comparison
               ("ask/pack_check.py", "read_pack"), ("ask/pack_check.py", "check_pack")}
    found = set()
    for root in ("ask", "drugs"):
        for path in sorted((ROOT / root).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            relative = path.relative_to(ROOT).as_posix()
            for function in ast.walk(ast.parse(path.read_text())):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    name = node.attr if isinstance(node, ast.Attribute) else \
                        node.value if isinstance(node, ast.Constant) else None
                    if name in ("dispensed_at", "expiry"):
                        found.add((relative, function.name))
    assert found - allowed == set(), f"dates read outside ask.rules.date_view's predicates: {found - allowed}"
    copies = {("ask/rules.py", "match"), ("ask/beliefs.py", "__post_init__"), ("drugs/lot_field.py", "read_lot_field"),
              ("drugs/lot_field.py", "_gs1"), ("ask/pack_check.py", "read_pack"), ("ask/pack_check.py", "check_pack")}
    assert allowed - copies <= found  # the walk sees the two it must
