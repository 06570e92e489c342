"""The sweep on REAL openFDA recall facts, built by the ingestion code (tests/factories.py); patients are
synthetic. The world, people and drafts fixtures are in tests/conftest.py.

D-0315-2019 lot 3061169 is a real Class II, Ongoing Mylan valsartan recall. Escalating it to Class I
(a new version of the same real record with classification "Class I", which is what
demo.escalation.escalate asserts) moves lot holders from caution to stop and leaves others safe.
"""

import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from ask.services import ask
from corrections.models import AuditEvent, Correction, OutboxMessage, Redecision, SweepRun
from corrections.sweep.run import count_stale, sweep
from memory.fact_writes import assert_claim
from memory.models import Decision, Fact
from tests.factories import LOT, RECALL, VALSARTAN, escalate, make_patient, recall_claim

# dispatch_not_enqueued (tests/conftest.py) for every test here, as it was when it lived in this module.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


def test_it_corrects_moved_verdicts_reaffirms_the_rest_and_shares_identical_inputs(world, no_auto_sweep):
    result = escalate()
    # a and b (caution on the lot). c is on another lot: its "safe" rests on no fact of this lot
    # (its premises are its own lot and the drug level), so the escalation does not touch it.
    assert count_stale() == 2

    report = sweep()

    assert (report.examined, report.corrected, report.reaffirmed) == (2, 2, 0)
    # a and b have identical inputs (question, lots, facts): one reasoner call for both; the notice
    # for the never-asked patient is the second.
    assert report.reasoner_calls == 2
    assert Redecision.objects.filter(shared=True).count() == 1
    drafts = Correction.objects.filter(kind=Correction.Kind.CORRECTION)
    assert {d.patient.external_ref for d in drafts} == {"SYN-A", "SYN-B"}
    for draft in drafts:
        assert (draft.old_verdict, draft.new_verdict) == ("caution", "stop")
        assert draft.trigger_fact_id == result.fact.id and draft.previous_fact_id == result.previous.id
        assert {"field": "classification", "before": "Class II", "after": "Class I"} in draft.diff
        assert draft.message.status == OutboxMessage.Status.HELD
        assert draft.audit_events.filter(action=AuditEvent.Action.DRAFTED).count() == 1
        assert draft.recall_number == RECALL and draft.severity == 3
        # Homed with the patient (REGIONAL BY ROW on CockroachDB).
        assert draft.region == draft.message.region == draft.patient.region != ""
        # The message says what happened, not just that something changed.
        # (letters: templates/letters/, worded in plain language; the FDA's text is a quoted detail)
        assert "stop taking" not in draft.drafted_text.lower()
        if draft.patient.preferred_channel == "sms":
            assert "Call us before your next dose (update about your valsartan)" in draft.drafted_text
        else:
            assert ("Since then, the recall has been raised to the most serious kind of recall"
                    in draft.drafted_text) and f"({RECALL}): “" in draft.drafted_text
    # Every examined decision is superseded by a new one with its own fresh read set.
    untouched = world["decisions"]["c"]
    untouched.refresh_from_db()
    assert untouched.status == Decision.Status.STANDING
    for old in (world["decisions"]["a"], world["decisions"]["b"]):
        old.refresh_from_db()
        assert old.status == Decision.Status.SUPERSEDED
        new = old.replaced_by
        assert new.status == Decision.Status.STANDING
        assert not new.reads.filter(fact__retracted_at__isnull=False).exists()
        assert new.reads.filter(fact=result.fact).exists()
    # The never-asked lot holder gets a notice, matched by lot.
    notice = Correction.objects.get(kind=Correction.Kind.NOTICE)
    assert notice.patient == world["never_asked"] and notice.match == "lot" and notice.new_verdict == "stop"
    assert notice.message.channel == "sms" and notice.message.recipient == "+15555550100"
    # An SMS draft is a short message, not the email letter; what the pharmacist reviews is what is sent.
    # The synthetic holder's row has the lot and the drug but no NDC: probable, and the SMS says "may".
    assert notice.match_class == "probable"
    assert len(notice.drafted_text) <= 320 and "a recall that may affect your valsartan" in notice.drafted_text
    assert "Dear" not in notice.drafted_text
    assert notice.message.body == notice.drafted_text and "stop taking" not in notice.drafted_text.lower()
    run = SweepRun.objects.get()
    assert (run.status, run.examined, run.corrected, run.reaffirmed, run.notices) == ("succeeded", 2, 2, 0, 1)

    # Nothing stale is left; a second sweep examines nothing and writes nothing.
    again = sweep()
    assert (again.examined, again.corrected, again.notices) == (0, 0, 0)
    assert Correction.objects.count() == 3


def test_dry_run_previews_and_writes_nothing(world, no_auto_sweep):
    escalate()
    counts = (Decision.objects.count(), Correction.objects.count(), SweepRun.objects.count())

    call_command("sweep", "--dry-run", stdout=(out := __import__("io").StringIO()), verbosity=0)

    text = out.getvalue()
    assert "DRY RUN" in text and "caution -> stop" in text
    assert "decisions examined: 2" in text and "corrected:          2" in text and "notices drafted:    1" in text
    assert (Decision.objects.count(), Correction.objects.count(), SweepRun.objects.count()) == counts
    assert count_stale() == 2


def test_the_supersession_listener_sweeps_after_commit(world, monkeypatch):
    from corrections import tasks

    enqueued = []

    def fake_delay(fact_ids):  # the broker is not under test: run the task as a plain function
        enqueued.append(fact_ids)
        tasks.sweep_facts(fact_ids)

    monkeypatch.setattr(tasks.sweep_facts, "delay", fake_delay)
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", True)  # opt-in when Celery is eager
    result = escalate()  # the listener fires on commit of the new version

    assert enqueued == [sorted([result.previous.id, result.fact.id])]  # retracted and new version

    run = SweepRun.objects.get()
    assert run.trigger == SweepRun.Trigger.SUPERSESSION and run.status == "succeeded"
    assert run.corrected == 2 and run.reaffirmed == 0
    assert count_stale() == 0


def test_a_draft_superseded_before_review_goes_stale_and_is_replaced(world, no_auto_sweep):
    escalate()
    sweep()
    first = Correction.objects.get(patient__external_ref="SYN-A", kind="correction")
    # A newer version of the same real record: the recall is terminated. The pack dispensed is still
    # from a recalled Class I lot, so the verdict stays "stop" (never "safe").
    assert_claim(recall_claim(RECALL, LOT, classification="Class I", status="Terminated"), reason="terminated")

    report = sweep()

    first.refresh_from_db()
    assert first.status == Correction.Status.STALE
    assert first.message.status == OutboxMessage.Status.CANCELLED
    # The patient was told "caution" and never got the "stop" draft: the replacement compares with
    # what they were told, and says the recall is closed but their lot was recalled.
    replacement = Correction.objects.get(replaces=first)
    assert (replacement.old_verdict, replacement.new_verdict) == ("caution", "stop")
    assert replacement.old_decision_id == world["decisions"]["a"].id
    assert "closed" in replacement.new_answer and "recalled lot" in replacement.new_answer
    assert report.examined == 2
    # The unsent notice about the Class I version is stale too, and replaced in the same step: its
    # patient still holds a lot of a Class I recall and was never told (closing it does not make
    # the pack safe, and staling the notice alone would leave them silent).
    notice = Correction.objects.get(kind="notice", replaces__isnull=True)
    assert notice.status == Correction.Status.STALE and notice.message.status == "cancelled"
    notice_replacement = Correction.objects.get(replaces=notice)
    assert notice_replacement.status == "draft" and notice_replacement.new_verdict == "stop"
    assert notice_replacement.trigger_fact.attributes["status"] == "Terminated"
    assert "closed" in notice_replacement.new_answer and "recalled lot" in notice_replacement.new_answer


def test_an_unsent_notice_is_replaced_when_the_recall_changes_again_but_stays_worse(world, no_auto_sweep):
    escalate()
    sweep()
    notice = Correction.objects.get(kind="notice")
    # Another version, still Class I and ongoing (the distribution text changed): not worse than the
    # Class I version, but the patient never heard of either, so they get a notice about the new one.
    newer = assert_claim(recall_claim(RECALL, LOT, classification="Class I",
                                      distribution_pattern="Nationwide (updated)"))

    sweep(fact_ids=[notice.trigger_fact_id])

    notice.refresh_from_db()
    assert notice.status == Correction.Status.STALE
    replacement = Correction.objects.get(replaces=notice)
    assert replacement.trigger_fact_id == newer.fact.id and replacement.status == "draft"
    assert replacement.previous_fact_id == notice.previous_fact_id  # still compared with Class II


def test_the_beat_task_is_scheduled_by_migration():
    import importlib

    from django.apps import apps
    from django_celery_beat.models import PeriodicTask

    # transaction=True tests flush migration data, so run the data migration's function again (twice:
    # it must be idempotent).
    migration = importlib.import_module("corrections.migrations.0002_permissions_and_beat")
    migration.create_beat_tasks(apps, None)
    migration.create_beat_tasks(apps, None)

    assert PeriodicTask.objects.filter(name__startswith="corrections:").count() == 2
    names = dict(PeriodicTask.objects.values_list("name", "task"))
    assert names["corrections: periodic sweep"] == "corrections.tasks.periodic_sweep"
    assert names["corrections: dispatch outbox"] == "corrections.tasks.dispatch_outbox"


def test_a_drug_level_escalation_notifies_by_drug_and_says_so(hashing_embeddings, no_auto_sweep):
    # D-0968-2018: a real Solco valsartan recall, "All lots within expiry" (drug-level, no lot).
    assert_claim(recall_claim("D-0968-2018", None))
    holder = make_patient("SYN-E", [(VALSARTAN, "3095511")])
    asked = make_patient("SYN-F", [(VALSARTAN, "3095512")])
    decision = ask(asked, "Is my valsartan safe?")
    assert decision.verdict == "caution"

    assert_claim(recall_claim("D-0968-2018", None, classification="Class I"))
    report = sweep()

    notice = Correction.objects.get(kind=Correction.Kind.NOTICE, patient=holder)
    assert notice.match == Correction.Match.DRUG
    # Matched by name only (no NDC on the row): a candidate, told what is and is not known.
    assert notice.match_class == "candidate"
    # "every batch" alone was not true of it: it covers the batches unexpired when it began, and says so.
    assert ("recall of some valsartan products (it covers every batch with an expiry date on or after July 13, "
            "2018)") in notice.drafted_text
    # A recall naming no lot stays "caution" whatever its class (we cannot tell whether their pack is
    # affected): the patient who asked is reaffirmed, with no correction. What the app told them is
    # not a reviewed letter, and no letter about this recall had been drafted for them: they get the
    # same notice as the holder who never asked (one letter per patient and recall).
    assert notice.new_verdict == "caution"
    assert not Correction.objects.filter(kind=Correction.Kind.CORRECTION).exists()
    assert Redecision.objects.get(old_decision=decision).outcome == "reaffirmed"
    told = Correction.objects.get(kind=Correction.Kind.NOTICE, patient=asked)
    assert (told.new_verdict, told.match_class, told.recall_number) == ("caution", "candidate", "D-0968-2018")
    assert (report.examined, report.reaffirmed, report.corrected, report.notices) == (1, 1, 0, 2)


def test_a_killed_sweeps_run_row_is_marked_abandoned_by_the_next_sweep(no_auto_sweep):
    """PostgreSQL: a live run holds its run lock (core.runlock); a run whose lock is free is dead at
    once, however fresh its heartbeat. (A real SIGKILL: tests/core/test_run_locks_procs.py.)"""
    from core.runlock import RunLock
    from corrections.sweep.run import RUN_LOCK

    dead = SweepRun.objects.create(trigger="manual", heartbeat=timezone.now())
    live = SweepRun.objects.create(trigger="manual", heartbeat=timezone.now() - timedelta(hours=1))

    with RunLock(RUN_LOCK, live.pk):
        sweep()

    dead.refresh_from_db()
    live.refresh_from_db()
    assert dead.status == SweepRun.Status.FAILED and "process is gone" in dead.error_text
    assert live.status == SweepRun.Status.RUNNING  # its lock is held: working, however slowly


def test_without_run_locks_a_run_is_dead_once_its_heartbeat_stops(no_auto_sweep, settings):
    """CockroachDB has no advisory locks (nor a PgBouncer in transaction mode keeps them): heartbeats."""
    settings.UNSAY_RUN_LOCKS = False
    dead = SweepRun.objects.create(trigger="manual", heartbeat=timezone.now() - timedelta(hours=1))
    live = SweepRun.objects.create(trigger="manual", heartbeat=timezone.now())

    sweep()

    dead.refresh_from_db()
    live.refresh_from_db()
    assert dead.status == SweepRun.Status.FAILED and "no heartbeat" in dead.error_text
    assert live.status == SweepRun.Status.RUNNING  # might still be working: left alone


def test_an_escalation_can_be_previewed_before_it_is_published(world, no_auto_sweep):
    import io

    from memory.models import Fact

    facts_before = list(Fact.objects.order_by("id").values_list("id", "retracted_at"))
    counts = (Decision.objects.count(), Correction.objects.count(), SweepRun.objects.count())
    out = io.StringIO()

    call_command("sweep", "--dry-run", "--escalate", RECALL, "--lot", LOT, "--classification", "Class I",
                 stdout=out, verbosity=0)

    text = out.getvalue()
    assert f"PREVIEW of escalating {RECALL} lot {LOT} to Class I" in text
    assert text.count("caution -> stop") == 2 and "would notify patient SYN-D (lot match)" in text
    assert patient_details_in(text) == []  # the operator's terminal is no place for names
    assert "decisions examined: 2" in text and "corrected:          2" in text and "reaffirmed:         0" in text
    # Nothing was escalated or written: the preview matches what publishing then does.
    assert list(Fact.objects.order_by("id").values_list("id", "retracted_at")) == facts_before
    assert (Decision.objects.count(), Correction.objects.count(), SweepRun.objects.count()) == counts
    escalate()
    report = sweep()
    assert (report.examined, report.corrected, report.reaffirmed, report.notices) == (2, 2, 0, 1)


def patient_details_in(text) -> list[str]:
    from patients.models import Patient

    return [value for patient in Patient.objects.all() for value in (patient.display_name, patient.email, patient.phone)
            if value and value in text]


def test_a_dry_run_names_each_patient_by_reference_only(world, no_auto_sweep):
    import io

    escalate()
    out = io.StringIO()
    call_command("sweep", "--dry-run", stdout=out, verbosity=0)

    text = out.getvalue()
    assert "DRY RUN: nothing was written." in text
    corrected = set(re.findall(r"would correct decision \d+ for (.+?): caution -> stop", text))
    assert corrected == {"patient SYN-A", "patient SYN-B"} and "would notify patient SYN-D (lot match)" in text
    assert patient_details_in(text) == []


def test_the_preview_refuses_to_publish(world):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="previews only"):
        call_command("sweep", "--escalate", RECALL, "--classification", "Class I")


def test_in_eager_mode_the_after_commit_sweep_is_opt_in(settings, monkeypatch):
    from corrections import tasks, triggers

    enqueued = []
    monkeypatch.setattr(tasks.sweep_facts, "delay", lambda fact_ids: enqueued.append(fact_ids))
    monkeypatch.delenv("UNSAY_SWEEP_ON_SUPERSESSION", raising=False)
    settings.CELERY_TASK_ALWAYS_EAGER = True  # no broker: the task would run inline in the writer
    tasks.enqueue_sweep_after_supersession(1, 2)
    settings.CELERY_TASK_ALWAYS_EAGER = False  # a real broker: always enqueue
    tasks.enqueue_sweep_after_supersession(3, 4)
    with triggers.auto_sweep_suppressed():
        tasks.enqueue_sweep_after_supersession(5, 6)
    assert enqueued == [[3, 4]]  # the retracted version's readers and the new version's premises


def test_a_decision_that_fails_to_re_decide_is_recorded_and_left_standing(world, no_auto_sweep, monkeypatch):
    import ask.services

    real_decide = ask.services.decide

    def flaky(patient, question, **kwargs):
        if patient.external_ref == "SYN-A":
            raise RuntimeError("reasoner unavailable")
        return real_decide(patient, question, **kwargs)

    monkeypatch.setattr(ask.services, "decide", flaky)
    escalate()
    report = sweep()

    assert (report.examined, report.errors) == (1, 1)
    run = SweepRun.objects.get()
    assert run.errors == 1 and "reasoner unavailable" in run.error_text and run.status == "succeeded"
    failed = world["decisions"]["a"]
    failed.refresh_from_db()
    assert failed.status == Decision.Status.STANDING and count_stale() == 1  # the next sweep retries it

    monkeypatch.setattr(ask.services, "decide", real_decide)
    assert sweep().examined == 1 and count_stale() == 0


def test_one_escalation_of_a_whole_recall_enqueues_one_sweep(world, monkeypatch):
    """Every lot of the recall is re-versioned in one transaction: the sweep hears it once, with all of them."""
    from corrections import tasks
    from demo.escalation import escalate as escalate_recall

    multi_lot = "D-0326-2019"  # real Mylan valsartan recall listing many lots
    for lot in ("3069019", "3069020", "3069021"):
        assert_claim(recall_claim(multi_lot, lot))
    enqueued = []
    monkeypatch.setattr(tasks.sweep_facts, "delay", lambda fact_ids: enqueued.append(fact_ids))
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", True)
    believed_before = set(Fact.objects.believed().filter(attributes__recall_number=multi_lot)
                          .values_list("id", flat=True))
    assert len(believed_before) == 3

    results = escalate_recall(multi_lot, "Class I", by="test")

    assert len(results) == len(believed_before)
    assert len(enqueued) == 1  # one transaction, one sweep: every retracted version and its successor
    assert set(believed_before) <= set(enqueued[0]) and len(enqueued[0]) == 2 * len(believed_before)


def test_a_rolled_back_retraction_is_never_announced(world, monkeypatch):
    from django.db import transaction

    from corrections import tasks
    from memory.fact_writes import retract_in_transaction

    enqueued = []
    monkeypatch.setattr(tasks.sweep_facts, "delay", lambda fact_ids: enqueued.append(fact_ids))
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", True)
    fact = Fact.objects.believed().get(attributes__recall_number=RECALL)
    with pytest.raises(RuntimeError), transaction.atomic():
        retract_in_transaction(fact.fact_key, reason="changed our mind")
        raise RuntimeError("rolled back")
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():  # a savepoint rolled back inside a commit
            retract_in_transaction(fact.fact_key, reason="changed our mind")
            raise RuntimeError("savepoint rolled back")
    assert enqueued == []
    assert Fact.objects.get(pk=fact.pk).retracted_at is None


def test_patients_who_differ_only_in_expiry_never_share_a_decision(hashing_embeddings, no_auto_sweep):
    """Real D-0222-2021 (Paroex chlorhexidine rinse, Ongoing) recalls ALL lots with expiry from
    Dec 31 2020 through Sep 30 2022. Two synthetic patients with the same drug, lot, NDC and
    dispensing date but expiries inside and outside that window must not share one outcome, in
    either order: the one inside is never told "safe"."""
    from datetime import date

    from ask.services import decide
    from corrections.sweep.decider import SharedDecider

    fact = assert_claim(recall_claim("D-0222-2021", None)).fact
    assert (fact.attributes["lot_scope"]["kind"], fact.attributes["lot_scope"]["expiry_window"]) == (
        "all_lots_window", ["2020-12-31", "2022-09-30"])
    inside = make_patient("SYN-EXP-IN", [{"drug": "chlorhexidine", "lot": "PX2041", "expiry": date(2021, 6, 30)}])
    outside = make_patient("SYN-EXP-OUT", [{"drug": "chlorhexidine", "lot": "PX2041", "expiry": date(2023, 6, 30)}])
    question = "Is my chlorhexidine safe?"
    plain = {p.pk: decide(p, question, subject=fact.subject).verdict for p in (inside, outside)}
    assert plain[inside.pk] != "safe" and plain[outside.pk] == "safe", plain
    for order in ((inside, outside), (outside, inside)):
        shared = SharedDecider()
        verdicts = {p.pk: shared.decide(p, question, fact.subject)[0].verdict for p in order}
        assert verdicts == plain and shared.calls == 2


def test_the_notice_anti_join_leaves_out_exactly_the_patients_who_asked(world, no_auto_sweep):
    """exposed_patients_of(fact, who_never_asked=True) (one query) is the exposed list less the
    patients with a standing decision resting on one of the fact's scopes, in the same order; a
    superseded decision no longer counts."""
    from corrections.sweep.notices import exposed_patients_of

    fact = Fact.objects.believed().get(fact_key=f"recall:{RECALL}:lot:{LOT}")
    everyone = exposed_patients_of(fact)
    asked = set(Decision.objects.standing().filter(patient_id__in=[p.id for p, *_ in everyone],
                                                   premise_set__members__scope__in=fact.scopes)
                .values_list("patient_id", flat=True))
    assert {p.external_ref for p, *_ in everyone} >= {"SYN-A", "SYN-B", "SYN-D"} and len(asked) == 2
    never = exposed_patients_of(fact, who_never_asked=True)
    assert [e[:3] for e in never] == [e[:3] for e in everyone if e[0].id not in asked]
    assert [p.external_ref for p, *_ in never] == ["SYN-D"]
    Decision.objects.filter(pk=world["decisions"]["a"].pk).update(status=Decision.Status.SUPERSEDED)
    assert {p.external_ref for p, *_ in exposed_patients_of(fact, who_never_asked=True)} == {"SYN-A", "SYN-D"}


def test_a_large_stale_set_is_shared_with_helper_sweeps_and_notices_are_drafted_once(world, monkeypatch):
    """UNSAY_SWEEP_WORKERS=2: a triggered sweep over more than one claimed range enqueues one helper
    sweep (ranges only); together they re-decide every stale decision once and the first drafts the notice."""
    from corrections import tasks

    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_PAGE_SIZE", 1)
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_RANGE_PAGES", 1)
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_WORKERS", 2)
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)
    ask(make_patient("SYN-E", [(VALSARTAN, LOT)]), "Is my valsartan safe?")  # a third decision on the lot
    result = escalate()
    helpers = []
    monkeypatch.setattr(tasks.sweep_facts, "delay",
                        lambda fact_ids, helper=False: helpers.append(tasks.sweep_facts(fact_ids, helper=helper)))
    tasks.sweep_facts([result.previous.id, result.fact.id])

    assert len(helpers) == 1
    runs = list(SweepRun.objects.order_by("id"))
    assert len(runs) == 2 and sum(r.corrected for r in runs) == 3 and count_stale() == 0
    assert Correction.objects.filter(kind=Correction.Kind.CORRECTION).count() == 3
    notices = Correction.objects.filter(kind=Correction.Kind.NOTICE)
    assert [n.patient.external_ref for n in notices] == ["SYN-D"]  # never asked: told once

    helpers.clear()
    tasks.sweep_facts([result.previous.id, result.fact.id])  # nothing left: no helper, nothing new
    assert helpers == [] and Correction.objects.count() == 4
