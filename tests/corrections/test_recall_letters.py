"""One reviewed letter per patient and recall (corrections.recall_letters), on REAL openFDA recall records
built by the ingestion code (tests/factories.py); patients and dispensing are synthetic.

D-0315-2019 lot 3061169 (tests/factories.RECALL, LOT) is a real Class II Mylan valsartan recall;
D-1300-2020 a real Class I Acella NP Thyroid recall listing lots M331J18-1 and M331J18-2 (and others);
D-0573-2016 a real Class II baclofen recall listing lots F10918 and F10918-2 (and others).
"""

import pytest

from ask.services import ask
from corrections import recall_letters
from corrections.drafts import notice_key
from corrections.models import AuditEvent, Correction
from corrections.review import approve, reject
from corrections.sweep.run import sweep
from memory.fact_writes import assert_claim, assert_claims, retract_claim
from outbox.dispatch import dispatch_ready
from patients.dispensing import delete_dispensing
from tests.factories import LOT, RECALL, VALSARTAN, escalate, make_patient, recall_claim, recall_claims_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]

LIVE = ("draft", "approved", "sent")
THYROID, THYROID_NDC, TYPED_WITHOUT_SUFFIX = "D-1300-2020", "42192-0331-01", "M331J18"
BACLOFEN, BACLOFEN_NDC = "D-0573-2016", "52372-0909-01"


def _live(patient, recall_number=RECALL):
    return list(Correction.objects.filter(patient=patient, recall_number=recall_number, status__in=LIVE)
                .order_by("id"))


@pytest.fixture
def holder(hashing_embeddings, no_auto_sweep):
    """A synthetic patient holding the recalled lot, who never asked; the recall published and swept."""
    assert_claim(recall_claim(RECALL, LOT))
    patient = make_patient("SYN-H", [(VALSARTAN, LOT)])
    sweep()
    return patient


def test_who_asked_while_their_notice_was_pending_still_gets_a_reviewed_letter_once_the_recall_closes(holder):
    escalate()  # Class I
    sweep()
    [pending] = _live(holder)
    assert (pending.kind, pending.new_verdict, pending.status) == ("notice", "stop", "draft")
    # The patient asks in the app before the pharmacist reviews it: the app says "stop" too.
    assert ask(holder, "Is my valsartan safe?").verdict == "stop"
    # FDA terminates the recall: the removal is complete, the pack the patient holds is still recalled.
    assert_claim(recall_claim(RECALL, LOT, classification="Class I", status="Terminated"), reason="terminated")

    sweep()

    pending.refresh_from_db()
    assert pending.status == "stale" and pending.message.status == "cancelled"
    [replacement] = _live(holder)
    assert replacement.replaces_id == pending.pk and replacement.kind == "notice"
    assert (replacement.status, replacement.new_verdict) == ("draft", "stop")
    assert replacement.trigger_fact.attributes["status"] == "Terminated"
    assert "closed" in replacement.new_answer and "recalled lot" in replacement.new_answer
    # Staled and replaced by the same sweep, the replacement drafted after the stale was recorded.
    stale_event = pending.audit_events.get(action=AuditEvent.Action.STALE)
    drafted_event = replacement.audit_events.get(action=AuditEvent.Action.DRAFTED)
    assert stale_event.sweep_run_id == drafted_event.sweep_run_id and stale_event.id < drafted_event.id
    assert sweep().notices == 0 and _live(holder) == [replacement]  # nothing twice


def test_a_failure_drafting_the_replacement_leaves_the_pending_notice_as_it_was(holder, monkeypatch):
    escalate()
    sweep()
    [pending] = _live(holder)
    ask(holder, "Is my valsartan safe?")
    assert_claim(recall_claim(RECALL, LOT, classification="Class I", status="Terminated"), reason="terminated")

    def broken(**kwargs):
        raise RuntimeError("the letter could not be drafted")

    monkeypatch.setattr(recall_letters, "write_draft", broken)
    with pytest.raises(RuntimeError):
        sweep()

    pending.refresh_from_db()
    assert pending.status == "draft" and pending.message.status == "held"  # one transaction: never neither
    monkeypatch.undo()
    sweep()
    assert [c.replaces_id for c in _live(holder)] == [pending.pk]


def test_a_pending_notice_overtaken_by_an_escalation_after_the_patient_asked_gives_way_to_their_correction(holder):
    [notice] = _live(holder)
    assert notice.new_verdict == "caution"
    assert ask(holder, "Is my valsartan safe?").verdict == "caution"  # the app told them "caution"

    escalate()  # Class I: their answer moves to "stop", which a correction tells them
    sweep()

    notice.refresh_from_db()
    [correction] = _live(holder)
    assert (correction.kind, correction.old_verdict, correction.new_verdict) == ("correction", "caution", "stop")
    assert notice.status == "stale"
    assert f"correction #{correction.pk}" in notice.audit_events.get(action=AuditEvent.Action.STALE).note


def test_a_pending_correction_whose_answer_comes_back_to_the_apps_is_replaced_by_a_notice(hashing_embeddings,
                                                                                         no_auto_sweep):
    assert_claim(recall_claim(RECALL, LOT))
    patient = make_patient("SYN-BACK", [(VALSARTAN, LOT)])
    assert ask(patient, "Is my valsartan safe?").verdict == "caution"
    sweep()
    [first] = _live(patient)  # the app's "caution" is not a reviewed letter: a notice says it
    escalate()
    sweep()
    [correction] = _live(patient)
    assert (correction.kind, correction.old_verdict, correction.new_verdict) == ("correction", "caution", "stop")
    first.refresh_from_db()
    assert first.status == "stale"

    # Reclassified back to Class II before review: the answer is "caution" again, as the app said. The
    # correction no longer holds; the patient still holds the recalled lot and has heard nothing reviewed.
    assert_claim(recall_claim(RECALL, LOT), reason="reclassified to Class II")
    report = sweep()

    correction.refresh_from_db()
    [notice] = _live(patient)
    assert correction.status == "stale" and report.notices == 1
    assert (notice.kind, notice.new_verdict, notice.replaces_id) == ("notice", "caution", correction.pk)
    assert notice.audit_events.get().sweep_run_id == correction.audit_events.get(action="stale").sweep_run_id


def test_an_escalation_that_moves_no_answer_replaces_the_pending_notice_of_a_patient_who_asked(hashing_embeddings,
                                                                                             no_auto_sweep):
    # D-0968-2018: a real Solco valsartan recall of every lot (drug level); a drug-level recall stays
    # "caution" whatever its class, so the escalation drafts no correction for the patient who asked.
    assert_claim(recall_claim("D-0968-2018", None))
    patient = make_patient("SYN-DL", [(VALSARTAN, "3095511")])
    sweep()
    [notice] = _live(patient, "D-0968-2018")
    assert ask(patient, "Is my valsartan safe?").verdict == "caution"

    assert_claim(recall_claim("D-0968-2018", None, classification="Class I"))
    sweep()

    notice.refresh_from_db()
    [replacement] = _live(patient, "D-0968-2018")
    assert notice.status == "stale" and replacement.replaces_id == notice.pk
    assert replacement.kind == "notice" and replacement.severity == 3  # the pharmacist reviews the Class I news
    assert not Correction.objects.filter(kind="correction").exists()


def test_who_asked_after_a_recall_and_never_had_a_letter_gets_one(hashing_embeddings, no_auto_sweep):
    assert_claim(recall_claim(RECALL, LOT))
    patient = make_patient("SYN-AA", [(VALSARTAN, LOT)])
    decision = ask(patient, "Is my valsartan safe?")  # before any sweep: the app's answer is all they have

    report = sweep()

    [notice] = _live(patient)
    assert (notice.kind, notice.new_verdict, notice.new_answer) == ("notice", decision.verdict, decision.answer)
    assert report.reasoner_calls == 0  # the standing answer is the decision now: not decided again
    assert sweep().notices == 0


def test_a_patient_no_longer_exposed_gets_none(holder):
    [notice] = _live(holder)
    delete_dispensing(holder.dispensings.get(), actor="test")

    sweep(patient_ids=[holder.pk])

    notice.refresh_from_db()
    assert notice.status == "stale" and _live(holder) == []
    assert "no longer exposed" in notice.audit_events.get(action=AuditEvent.Action.STALE).note


def test_a_withdrawn_recall_stales_the_pending_notice_and_drafts_nothing(holder):
    [notice] = _live(holder)
    retract_claim(f"recall:{RECALL}:lot:{LOT}", reason="withdrawn (test)")

    sweep()

    notice.refresh_from_db()
    assert notice.status == "stale" and _live(holder) == []


def test_a_pharmacists_rejection_stands_until_something_is_news(holder, people):
    [notice] = _live(holder)
    reject(notice.pk, user=people["pharmacist"], reason="spoke to the patient by phone")
    assert sweep().notices == 0 and _live(holder) == []

    escalate()
    sweep()

    [news] = _live(holder)
    assert news.new_verdict == "stop" and news.severity == 3


def _thyroid_world():
    assert_claims(recall_claims_of(THYROID))
    return make_patient("SYN-THY", [{"drug": "thyroid", "lot": TYPED_WITHOUT_SUFFIX, "ndc": THYROID_NDC}])


def test_one_pack_near_two_lots_of_one_recall_gets_one_notice_naming_both(hashing_embeddings, no_auto_sweep):
    patient = _thyroid_world()  # "M331J18": the recall's "-1" and "-2" left off, a near miss of both

    report = sweep()

    [notice] = _live(patient, THYROID)
    assert report.notices == 1 and notice.new_verdict == "stop"  # Class I
    named = {entry["lot"]: entry for entry in notice.matched_lots}
    assert set(named) == {"M331J18-1", "M331J18-2"}
    assert {entry["match_class"] for entry in named.values()} == {"probable"}
    assert all("suffix left off" in entry["rule"] for entry in named.values())
    assert named[notice.trigger_fact.lot]["fact"] == notice.trigger_fact_id  # the letter names the strongest
    assert notice.matched_lots[0]["fact"] == notice.trigger_fact_id
    assert notice.dedupe_key == notice_key(patient.pk, THYROID, "stop", [e["fact"] for e in notice.matched_lots])
    # The one letter names both lots the pack may be, the strongest first.
    assert f"lots {notice.trigger_fact.lot}, " in notice.drafted_text
    assert all(lot in notice.drafted_text for lot in named)
    assert sweep().notices == 0


def test_one_row_of_lot_a_also_near_lot_a_dash_two_gets_one_notice(hashing_embeddings, no_auto_sweep):
    # The record as it stood while the recall was open (FDA has since terminated it: a recall closed
    # when we first learn of it owes no letter by itself).
    assert_claims(recall_claims_of(BACLOFEN, status="Ongoing"))
    patient = make_patient("SYN-BAC", [{"drug": "baclofen", "lot": "F10918", "ndc": BACLOFEN_NDC}])

    sweep()

    [notice] = _live(patient, BACLOFEN)
    named = {entry["lot"]: entry["match_class"] for entry in notice.matched_lots}
    assert named == {"F10918": "confirmed", "F10918-2": "probable"}
    assert (notice.trigger_fact.lot, notice.match_class) == ("F10918", "confirmed")  # the strongest
    # A pack confirmed as F10918 is that lot: the letter names it alone.
    assert "(lot F10918)" in notice.drafted_text and "F10918-2" not in notice.drafted_text


def test_a_lot_added_near_the_pack_is_named_in_the_pending_notice_and_not_sent_twice(hashing_embeddings,
                                                                                     no_auto_sweep, people, settings):
    first, second = (recall_claim(THYROID, lot) for lot in ("M331J18-1", "M331J18-2"))
    assert_claim(first)  # as first published: one of the two lots
    patient = make_patient("SYN-THY2", [{"drug": "thyroid", "lot": TYPED_WITHOUT_SUFFIX, "ndc": THYROID_NDC}])
    sweep()
    [notice] = _live(patient, THYROID)
    assert [entry["lot"] for entry in notice.matched_lots] == ["M331J18-1"]

    assert_claim(second)  # the amended record lists the other lot too
    sweep()

    notice.refresh_from_db()
    [replacement] = _live(patient, THYROID)
    assert notice.status == "stale" and replacement.replaces_id == notice.pk
    assert sorted(entry["lot"] for entry in replacement.matched_lots) == ["M331J18-1", "M331J18-2"]
    # Sent: the same pack is not written to again for the same recall.
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    approve(replacement.pk, user=people["pharmacist"])
    assert dispatch_ready().sent == 1
    retract_claim(second.fact_key, reason="lot no longer listed (test amendment)")
    assert_claim(second)
    sweep()
    assert _live(patient, THYROID) == [Correction.objects.get(pk=replacement.pk)]


def test_a_recall_closed_when_we_first_learn_of_it_owes_no_letter_but_closing_a_known_one_does(
        hashing_embeddings, no_auto_sweep):
    assert_claim(recall_claim(RECALL, LOT, status="Terminated"))  # a history load
    patient = make_patient("SYN-HIST", [(VALSARTAN, LOT)])
    sweep()
    sweep(patient_ids=[patient.pk])
    assert _live(patient) == []

    assert_claim(recall_claim(RECALL, LOT))  # re-opened: believed active
    sweep()
    [notice] = _live(patient)
    delete_dispensing(patient.dispensings.get(), actor="test")
    sweep(patient_ids=[patient.pk])
    assert _live(patient) == []
    assert_claim(recall_claim(RECALL, LOT, status="Terminated"))
    again = make_patient("SYN-HIST3", [(VALSARTAN, LOT)])

    sweep(patient_ids=[again.pk])  # dispensing registered once it is closed: still a recalled lot

    [letter] = _live(again)
    assert letter.kind == "notice" and letter.trigger_fact.attributes["status"] == "Terminated"



