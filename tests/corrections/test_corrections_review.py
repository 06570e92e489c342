"""Pharmacist review: queue, htmx card actions (HX-Request), plain-POST fallbacks, permissions, audit."""

import pytest

from corrections.models import AuditEvent, Correction, OutboxMessage
from corrections.review import recall_dashboard
from tests.factories import LOT, RECALL

# people, drafts and dispatch_not_enqueued are in tests/conftest.py; dispatch_not_enqueued for every test.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]
HTMX = {"HX-Request": "true"}


def test_it_lists_drafts_grouped_by_recall_with_evidence_and_match(client, people, drafts):
    client.force_login(people["pharmacist"])
    response = client.get("/corrections/review/")
    assert response.status_code == 200
    body = response.content.decode()
    assert f">{RECALL}</a> · Class I" in body
    for ref in ("SYN-A", "SYN-B", "SYN-D"):
        assert f'id="card-{drafts[ref].public_id}"' in body
    assert "Matched by lot" in body and "Asked (answer on record)" in body
    assert "classification</td><td>Class II</td><td>Class I" in body
    [group] = response.context["groups"]
    assert [d.created for d in group.drafts] == sorted(d.created for d in group.drafts)


def test_it_forbids_non_pharmacists_and_changes_nothing(client, people, drafts):
    draft = drafts["SYN-A"]
    client.force_login(people["staff"])
    assert client.get("/corrections/review/").status_code == 403
    assert client.post(f"/corrections/review/{draft.public_id}/approve/", headers=HTMX).status_code == 403
    assert client.post(f"/corrections/review/{draft.public_id}/reject/", {"reason": "x"}).status_code == 403
    assert client.post(f"/corrections/review/recall/{RECALL}/approve-all/", {"confirm": "on"}).status_code == 403
    draft.refresh_from_db()
    assert draft.status == "draft" and draft.message.status == "held"
    assert not AuditEvent.objects.exclude(action=AuditEvent.Action.DRAFTED).exists()
    client.logout()
    assert client.get("/corrections/review/").status_code == 302  # anonymous: to the login page


def test_htmx_approve_swaps_just_the_card_and_readies_the_message(client, people, drafts):
    draft = drafts["SYN-A"]
    client.force_login(people["pharmacist"])
    response = client.post(f"/corrections/review/{draft.public_id}/approve/", headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "<html" not in body and f'id="card-{draft.public_id}"' in body and 'data-status="approved"' in body
    draft.refresh_from_db()
    assert draft.status == "approved" and draft.reviewed_by == people["pharmacist"]
    assert draft.message.status == OutboxMessage.Status.READY
    event = draft.audit_events.get(action=AuditEvent.Action.APPROVED)
    assert event.actor == people["pharmacist"] and event.before["status"] == "draft"
    assert event.after["status"] == "approved"
    # A second approve is refused without changing anything.
    again = client.post(f"/corrections/review/{draft.public_id}/approve/", headers=HTMX)
    assert again.status_code == 409 and "already approved" in again.content.decode()


def test_edit_then_approve_keeps_the_drafted_text(client, people, drafts):
    draft = drafts["SYN-B"]
    client.force_login(people["pharmacist"])
    form = client.get(f"/corrections/review/{draft.public_id}/edit/", headers=HTMX)
    assert form.status_code == 200 and "<textarea" in form.content.decode()
    response = client.post(f"/corrections/review/{draft.public_id}/edit/", {"final_text": "Please call us today."},
                           headers=HTMX)
    assert response.status_code == 200
    draft.refresh_from_db()
    assert draft.final_text == "Please call us today." and draft.drafted_text.startswith("Dear Synthetic SYN-B")
    assert draft.message.body == "Please call us today." and draft.message.status == "ready"
    event = draft.audit_events.get(action=AuditEvent.Action.EDITED)
    assert event.before["text"] == draft.drafted_text and event.after["text"] == "Please call us today."


def test_reject_needs_a_reason_and_works_without_javascript(client, people, drafts):
    draft = drafts["SYN-D"]
    client.force_login(people["pharmacist"])
    empty = client.post(f"/corrections/review/{draft.public_id}/reject/", {"reason": "  "})
    assert empty.status_code == 400
    draft.refresh_from_db()
    assert draft.status == "draft"
    response = client.post(f"/corrections/review/{draft.public_id}/reject/", {"reason": "Patient moved away"})
    assert response.status_code == 302 and response["Location"] == "/corrections/review/"
    draft.refresh_from_db()
    assert draft.status == "rejected" and draft.rejection_reason == "Patient moved away"
    assert draft.message.status == OutboxMessage.Status.CANCELLED
    assert draft.audit_events.get(action="rejected").note == "Patient moved away"


def test_bulk_approve_needs_confirmation_and_approves_only_what_was_shown(client, people, drafts):
    client.force_login(people["pharmacist"])
    page = client.get(f"/corrections/review/recall/{RECALL}/approve-all/")
    assert page.status_code == 200 and len(page.context["drafts"]) == 3
    unconfirmed = client.post(f"/corrections/review/recall/{RECALL}/approve-all/", {})
    assert unconfirmed.status_code == 400
    assert Correction.objects.filter(status="draft").count() == 3
    shown = [drafts["SYN-A"].pk, drafts["SYN-B"].pk]
    response = client.post(f"/corrections/review/recall/{RECALL}/approve-all/", {"confirm": "on", "ids": shown},
                           headers=HTMX)
    assert response.status_code == 200 and response["HX-Redirect"].endswith("/corrections/review/")
    assert set(Correction.objects.filter(status="approved").values_list("pk", flat=True)) == set(shown)
    assert Correction.objects.get(pk=drafts["SYN-D"].pk).status == "draft"


def test_a_draft_whose_fact_was_superseded_cannot_be_approved(client, people, drafts):
    from memory.fact_writes import assert_claim
    from tests.factories import recall_claim

    draft = drafts["SYN-A"]
    # The real record with only its class and status changed: a newer version the draft did not see.
    assert_claim(recall_claim(RECALL, LOT, classification="Class I", status="Terminated"))
    client.force_login(people["pharmacist"])
    response = client.post(f"/corrections/review/{draft.public_id}/approve/", headers=HTMX)
    assert response.status_code == 409 and "newer version" in response.content.decode()
    draft.refresh_from_db()
    assert draft.status == "draft" and draft.message.status == "held"


def test_dashboard_counts_per_recall(client, people, drafts):
    from corrections.review import approve, reject

    approve(drafts["SYN-A"].pk, user=people["pharmacist"])
    reject(drafts["SYN-B"].pk, user=people["pharmacist"], reason="duplicate")
    [row] = [r for r in recall_dashboard() if r["recall_number"] == RECALL]
    assert (row["examined"], row["corrected"], row["reaffirmed"], row["notices"]) == (2, 2, 0, 1)
    assert (row["approved"], row["rejected"], row["pending"], row["sent"]) == (1, 1, 1, 0)
    assert row["classification"] == "Class I" and 0 <= row["class_i_hours"] < 1
    client.force_login(people["pharmacist"])
    assert f'data-recall="{RECALL}"' in client.get("/corrections/dashboard/").content.decode()


def test_sweep_runs_partial_polls_while_running_and_stops_when_done(client, people, drafts):
    client.force_login(people["pharmacist"])
    done = client.get("/corrections/sweeps/_hx/", headers=HTMX)
    assert done.status_code == 286 and 'hx-trigger="none"' in done.content.decode()
    from corrections.models import SweepRun

    SweepRun.objects.create(trigger="manual")
    running = client.get("/corrections/sweeps/_hx/", headers=HTMX)
    assert running.status_code == 200 and 'hx-trigger="every 2s"' in running.content.decode()


def test_the_operations_page_loads_the_sweep_runs_partial(client, people):
    client.force_login(people["staff"])
    page = client.get("/recalls/ops/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'id="sweep-runs"' in body and 'hx-trigger="load"' in body and "/corrections/sweeps/_hx/" in body
    partial = client.get("/corrections/sweeps/_hx/", headers=HTMX)
    assert partial.status_code == 286 and "No sweeps yet" in partial.content.decode()


def test_approval_enqueues_dispatch_only_after_commit(people, drafts, dispatch_not_enqueued):
    from corrections.review import approve

    approve(drafts["SYN-A"].pk, user=people["pharmacist"])
    assert len(dispatch_not_enqueued) == 1


def test_the_queue_does_not_query_per_draft(client, people, drafts, django_assert_max_num_queries):
    client.force_login(people["pharmacist"])
    # session, user, 2 for permissions, the per-recall counts (GROUP BY), then per recall one page of
    # cards and one small prefetch each of its fact versions and answered decisions: never per draft
    with django_assert_max_num_queries(9):
        response = client.get("/corrections/review/")
    assert response.status_code == 200 and len(response.context["groups"][0].drafts) == 3
