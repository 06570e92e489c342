"""Recall worklist: deadline rules, task transitions, "checked, none found", the contact log, the
follow-up queue and the effectiveness report's counts against the rows (real database, real sweep
drafts of the real D-0315-2019 valsartan recall; patients synthetic)."""

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import PermissionDenied

from corrections import review
from corrections.models import Correction, OutboxMessage
from memory.fact_writes import assert_claim
from memory.models import Fact
from tests.factories import RECALL, recall_claim
from worklist import recall_list, recall_pages, recall_report, services
from worklist.models import ContactAttempt, RecallTask, Step, WorkEvent

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]
T0 = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


# --- deadline rules -------------------------------------------------------------------------------

def test_deadline_is_due_within_the_window(settings):
    settings.UNSAY_CLASS1_DEADLINE_DAYS = 3
    d = recall_list.deadline_for(T0, None, now=T0 + timedelta(days=2, hours=23))
    assert (d.state, d.due_at) == ("due", T0 + timedelta(days=3)) and d.open


def test_deadline_is_overdue_after_the_window_without_notification(settings):
    settings.UNSAY_CLASS1_DEADLINE_DAYS = 3
    assert recall_list.deadline_for(T0, None, now=T0 + timedelta(days=3, seconds=1)).state == "overdue"


def test_deadline_is_met_when_notified_in_time_and_missed_when_late(settings):
    settings.UNSAY_CLASS1_DEADLINE_DAYS = 3
    assert recall_list.deadline_for(T0, T0 + timedelta(days=3), now=T0 + timedelta(days=30)).state == "met"
    assert recall_list.deadline_for(T0, T0 + timedelta(days=3, minutes=1)).state == "missed"


def test_the_deadline_days_are_configurable(settings):
    settings.UNSAY_CLASS1_DEADLINE_DAYS = 1
    assert recall_list.deadline_for(T0, None, now=T0 + timedelta(days=2)).state == "overdue"


def test_no_deadline_without_a_class_i_version():
    assert recall_list.deadline_for(None, None).state == "none"


def test_the_clock_starts_at_the_belief_time_of_the_first_class_i_version(drafts):
    first_class1 = Fact.objects.filter(fact_key__startswith=f"recall:{RECALL}:",
                                       attributes__classification="Class I").order_by("asserted_at").first()
    # A later re-statement of the same Class I recall does not restart the clock.
    assert_claim(recall_claim(RECALL, "3061169", classification="Class I", status="Completed"), reason="completed")
    [row] = [r for r in recall_list.worklist() if r.recall_number == RECALL]
    assert row.facts.first_class1 == first_class1.asserted_at
    assert row.deadline.due_at == first_class1.asserted_at + timedelta(days=3)
    assert row.deadline.state == "due"


# --- the worklist ---------------------------------------------------------------------------------

def test_the_worklist_lists_the_recall_with_counts_by_class_and_deadline(client, people, drafts):
    [row] = [r for r in recall_list.worklist() if r.recall_number == RECALL]
    assert row.facts.classification == "Class I" and row.pending == 3
    # every exposed patient by match class (A, B asked and D never asked, all on the lot with no NDC)
    assert row.by_class == {"probable": 3} and row.answered == 2
    client.force_login(people["pharmacist"])
    body = client.get("/worklist/").content.decode()
    assert f'data-recall="{RECALL}"' in body and 'data-deadline="due"' in body
    assert "Class I recall due" in body
    assert client.get("/worklist/status.json").json()["due"] == 1


def test_worklist_screens_are_for_pharmacists_only(client, people, drafts):
    client.force_login(people["staff"])
    for url in ("/worklist/", f"/worklist/recall/{RECALL}", f"/worklist/report/{RECALL}",
                f"/worklist/report.csv/{RECALL}", "/worklist/follow-up/", "/worklist/history/"):
        assert client.get(url).status_code == 403, url
    with pytest.raises(PermissionDenied):
        services.complete_step(RECALL, Step.ACKNOWLEDGE, user=people["staff"])


# --- task transitions -----------------------------------------------------------------------------

def _approve_all(user):
    for c in Correction.objects.filter(status="draft"):
        review.approve(c.pk, user=user)


def test_steps_go_in_order_and_record_who_and_when(people, drafts, dispatch_not_enqueued):
    phil = people["pharmacist"]
    with pytest.raises(services.WorkflowError, match="Acknowledge the recall first"):
        services.complete_step(RECALL, Step.CHECK_STOCK, user=phil, note="none in stock")
    task = services.complete_step(RECALL, Step.ACKNOWLEDGE, user=phil)
    assert task.done_by == phil and task.done_at is not None
    with pytest.raises(services.WorkflowError, match="already recorded by phil"):
        services.complete_step(RECALL, Step.ACKNOWLEDGE, user=phil)
    with pytest.raises(services.WorkflowError, match="Say what the stock check found"):
        services.complete_step(RECALL, Step.CHECK_STOCK, user=phil)
    services.complete_step(RECALL, Step.CHECK_STOCK, user=phil, note="2 packs of lot 3061169 quarantined")
    assert WorkEvent.objects.filter(action="step", recall_number=RECALL).count() == 2


def test_notify_needs_an_attempt_for_every_patient(people, drafts, dispatch_not_enqueued):
    phil = people["pharmacist"]
    services.complete_step(RECALL, Step.ACKNOWLEDGE, user=phil)
    with pytest.raises(services.WorkflowError, match="3 exposed patient"):
        services.complete_step(RECALL, Step.NOTIFY, user=phil)
    _approve_all(phil)
    services.complete_step(RECALL, Step.NOTIFY, user=phil)
    assert RecallTask.objects.filter(step=Step.NOTIFY).exists()


def test_follow_up_and_close_need_every_patient_accounted_for(people, drafts, dispatch_not_enqueued):
    phil = people["pharmacist"]
    services.complete_step(RECALL, Step.ACKNOWLEDGE, user=phil)
    services.complete_step(RECALL, Step.CHECK_STOCK, user=phil, note="none in stock")
    _approve_all(phil)
    # Two messages go out; one send fails: that patient is not reached.
    sent, failed = list(Correction.objects.filter(status="approved").order_by("id"))[:2]
    for c in (sent, Correction.objects.filter(status="approved").order_by("id")[2]):
        Correction.objects.filter(pk=c.pk).update(status="sent")
        OutboxMessage.objects.filter(correction=c).update(status="sent", sent_at=T0)
    OutboxMessage.objects.filter(correction=failed).update(status="failed", last_error="bounced")
    services.complete_step(RECALL, Step.NOTIFY, user=phil)
    with pytest.raises(services.WorkflowError, match="1 patient"):
        services.complete_step(RECALL, Step.FOLLOW_UP, user=phil)
    with pytest.raises(services.WorkflowError, match="Before closing: Follow up"):
        services.complete_step(RECALL, Step.CLOSE, user=phil)
    [row] = [r for r in recall_list.worklist() if r.recall_number == RECALL]
    assert row.not_reached == 1
    assert [ln.patient_id if hasattr(ln, "patient_id") else ln.patient.id
            for _, ln in recall_pages.follow_up_queue()] == [failed.patient_id]
    services.log_contact(RECALL, failed.patient, user=phil, method="phone", outcome="not_reached", note="no answer")
    assert recall_pages.recall_file(RECALL).unaccounted[0].state == "not_reached"
    services.log_contact(RECALL, failed.patient, user=phil, method="phone", outcome="reached", note="will bring pack")
    services.complete_step(RECALL, Step.FOLLOW_UP, user=phil)
    services.complete_step(RECALL, Step.CLOSE, user=phil)
    assert recall_pages.recall_file(RECALL).closed
    assert recall_pages.follow_up_queue() == []
    with pytest.raises(services.WorkflowError, match="closed"):
        services.log_contact(RECALL, failed.patient, user=phil, method="phone", outcome="reached")


def test_contact_outcomes_need_their_reasons(people, drafts):
    phil, patient = people["pharmacist"], drafts["SYN-A"].patient
    with pytest.raises(services.WorkflowError, match="Say why no contact is needed"):
        services.log_contact(RECALL, patient, user=phil, method="phone", outcome="not_needed")
    with pytest.raises(services.WorkflowError, match="Letter posted"):
        services.log_contact(RECALL, patient, user=phil, method="phone", outcome="posted")
    assert not ContactAttempt.objects.exists()


def test_checked_none_found_is_refused_while_anyone_is_exposed(people, drafts):
    phil = people["pharmacist"]
    services.complete_step(RECALL, Step.ACKNOWLEDGE, user=phil)
    with pytest.raises(services.WorkflowError, match="3 patient"):
        services.record_none_found(RECALL, user=phil)


def test_checked_none_found_closes_a_recall_that_touched_nobody(client, people, world):
    from tests.factories import OTHER_RECALL  # a real recall of a lot nobody here received

    phil = people["pharmacist"]
    services.complete_step(OTHER_RECALL, Step.ACKNOWLEDGE, user=phil)
    services.complete_step(OTHER_RECALL, Step.CHECK_STOCK, user=phil, note="none in stock")
    services.record_none_found(OTHER_RECALL, user=phil, note="dispensing 2019-2026 searched")
    services.complete_step(OTHER_RECALL, Step.CLOSE, user=phil)
    f = recall_pages.recall_file(OTHER_RECALL)
    assert f.closed and f.none_found and f.exposed == 0
    client.force_login(phil)
    body = client.get(f"/worklist/report/{OTHER_RECALL}").content.decode()
    assert "Yes — phil" in body and "dispensing 2019-2026 searched" in body


def test_a_recall_number_with_a_slash_routes(client, people, drafts):
    client.force_login(people["pharmacist"])
    assert client.get("/worklist/recall/D-12/2019").status_code == 404  # unknown, explained, not a 500
    assert "No recall D-12/2019 on file" in client.get("/worklist/recall/D-12/2019").content.decode()


# --- the report -----------------------------------------------------------------------------------

def test_report_counts_match_its_rows_and_the_csv(client, people, drafts, dispatch_not_enqueued):
    phil = people["pharmacist"]
    a, b, d = drafts["SYN-A"], drafts["SYN-B"], drafts["SYN-D"]
    review.approve(a.pk, user=phil)
    Correction.objects.filter(pk=a.pk).update(status="sent")
    OutboxMessage.objects.filter(correction=a).update(status="sent", sent_at=T0)
    services.log_contact(RECALL, b.patient, user=phil, method="phone", outcome="not_reached")
    services.log_contact(RECALL, d.patient, user=phil, method="letter", outcome="posted")
    data = recall_report.report(RECALL)
    rows, summary = data["rows"], data["summary"]
    assert summary["exposed"] == len(rows) == 3
    assert summary["notified"] == sum(r["state"] == "notified" for r in rows) == 2
    assert summary["not_reached"] == sum(r["state"] not in ("reached", "notified", "not_needed") for r in rows) == 1
    assert summary["contacted"] == sum(r["attempts"] > 0 for r in rows) == 3
    assert sum(summary["by_class"].values()) == len(rows)
    by_ref = {r["patient_ref"]: r for r in rows}
    assert by_ref["SYN-D"]["reached_or_notified_by"] == "phil" and by_ref["SYN-B"]["state"] == "not_reached"
    client.force_login(phil)
    response = client.get(f"/worklist/report.csv/{RECALL}")
    assert response["Content-Type"].startswith("text/csv")
    parsed = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(parsed) == 3 and {r["patient_ref"] for r in parsed} == {"SYN-A", "SYN-B", "SYN-D"}
    page = client.get(f"/worklist/report/{RECALL}").content.decode()
    assert '<td id="n-notified">2</td>' in page and '<td id="n-not-reached">1</td>' in page


def test_the_report_csv_never_hands_a_spreadsheet_a_formula(client, people, drafts, dispatch_not_enqueued):
    """A patient name (or any text cell) starting with = + - @ or a tab is written as text."""
    patient = drafts["SYN-A"].patient
    patient.display_name = '=HYPERLINK("http://attacker.example/","Synthetic SYN-A")'
    patient.save()
    drafts["SYN-B"].patient.display_name = "@SUM(1+1)"
    drafts["SYN-B"].patient.save()
    client.force_login(people["pharmacist"])
    parsed = list(csv.DictReader(io.StringIO(client.get(f"/worklist/report.csv/{RECALL}").content.decode())))
    cells = [value for row in parsed for value in row.values() if isinstance(value, str)]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@", "\t", "\r"))]
    assert any(cell.startswith("'=HYPERLINK(") for cell in cells) and "'@SUM(1+1)" in cells


def test_the_report_csv_holds_when_a_spreadsheet_splits_it_on_semicolons(client, people, drafts,
                                                                         dispatch_not_enqueued):
    """A spreadsheet that splits on ';' opens a cell after every semicolon: none of them is a formula."""
    drafts["SYN-A"].patient.display_name = ';=HYPERLINK("http://attacker.example/","Synthetic SYN-A")'
    drafts["SYN-A"].patient.save()
    drafts["SYN-B"].patient.display_name = "Synthetic SYN-B;\uff1dSUM(1+1)"
    drafts["SYN-B"].patient.save()
    client.force_login(people["pharmacist"])
    text = client.get(f"/worklist/report.csv/{RECALL}").content.decode()
    cells = [cell.strip('"') for line in text.splitlines() for cell in line.split(";")]
    assert len(cells) > 3
    assert not [cell for cell in cells if cell.lstrip()[:1] in {"=", "+", "-", "@", "\uff1d"}]
    names = {row["patient_name"] for row in csv.DictReader(io.StringIO(text))}
    assert names >= {"';'=HYPERLINK(\"http://attacker.example/\",\"Synthetic SYN-A\")",
                     "Synthetic SYN-B;'\uff1dSUM(1+1)"}


def test_patient_trail_and_history_name_patients(client, people, drafts, dispatch_not_enqueued):
    phil = people["pharmacist"]
    review.approve(drafts["SYN-A"].pk, user=phil)
    services.log_contact(RECALL, drafts["SYN-A"].patient, user=phil, method="phone", outcome="reached")
    client.force_login(phil)
    trail = client.get(f"/worklist/patient/{drafts['SYN-A'].patient.public_id}/").content.decode()
    assert "Drafted by sweep" in trail and "Approved" in trail and "Contact logged" in trail and RECALL in trail
    history = client.get("/worklist/history/").content.decode()
    assert "Synthetic SYN-A" in history and "Call us before your next dose" in history
