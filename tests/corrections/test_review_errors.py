"""Review never fails silently: 409 (a colleague reviewed it, a newer recall version arrived, the
recipient changed) and 400 (empty reason, SMS over the limit) answer with an explaining card that
htmx swaps over the card; the recipient is shown and re-checked at approval; the queue pages."""

import pytest
from django.core.exceptions import ValidationError

from corrections import review
from corrections.models import AuditEvent, Correction, OutboxMessage
from memory.fact_writes import assert_claim
from patients.models import Patient, normalize_phone
from tests.factories import LOT, RECALL, recall_claim

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]
HTMX = {"HX-Request": "true"}


def _assert_error_card(response, correction, status, text):
    assert response.status_code == status
    assert response["HX-Retarget"] == f"#card-{correction.public_id}" and response["HX-Reswap"] == "outerHTML"
    body = response.content.decode()
    assert "<html" not in body and 'class="error-card"' in body and text in body
    return body


def test_approving_what_a_colleague_already_reviewed_explains_409(client, people, drafts, dispatch_not_enqueued, django_user_model):  # noqa: E501
    draft = drafts["SYN-A"]
    colleague = django_user_model.objects.create_user("pat", password="pw")
    colleague.groups.set(people["pharmacist"].groups.all())
    review.reject(draft.pk, user=colleague, reason="Patient collected a replacement")
    client.force_login(people["pharmacist"])
    response = client.post(f"/corrections/review/{draft.public_id}/approve/", headers=HTMX)
    body = _assert_error_card(response, draft, 409, "already rejected")
    assert 'data-status="rejected"' in body and "by pat" in body
    draft.refresh_from_db()
    assert draft.status == "rejected" and draft.reviewed_by == colleague


def test_approving_a_draft_of_a_superseded_recall_version_explains_409(client, people, drafts):
    draft = drafts["SYN-B"]
    assert_claim(recall_claim(RECALL, LOT, classification="Class I", status="Terminated"), reason="terminated")
    client.force_login(people["pharmacist"])
    response = client.post(f"/corrections/review/{draft.public_id}/approve/", headers=HTMX)
    _assert_error_card(response, draft, 409, "A newer version of the recall has arrived")
    draft.refresh_from_db()
    assert draft.status == "draft" and draft.message.status == "held"


def test_rejecting_without_a_reason_explains_400(client, people, drafts):
    draft = drafts["SYN-D"]
    client.force_login(people["pharmacist"])
    response = client.post(f"/corrections/review/{draft.public_id}/reject/", {"reason": "   "}, headers=HTMX)
    body = _assert_error_card(response, draft, 400, "a rejection needs a reason")
    assert "<textarea" in body  # the form stays open to fix
    draft.refresh_from_db()
    assert draft.status == "draft"


def test_an_sms_over_the_limit_is_refused_by_the_server_with_a_400_card(client, people, drafts, settings):
    draft = drafts["SYN-D"]  # the SMS patient
    assert draft.message.channel == "sms" and len(draft.drafted_text) <= settings.UNSAY_SMS_LIMIT
    client.force_login(people["pharmacist"])
    form = client.get(f"/corrections/review/{draft.public_id}/edit/", headers=HTMX).content.decode()
    assert f'data-sms-limit="{settings.UNSAY_SMS_LIMIT}"' in form and 'class="sms-count"' in form
    response = client.post(f"/corrections/review/{draft.public_id}/edit/", {"final_text": "x" * 420}, headers=HTMX)
    _assert_error_card(response, draft, 400, "at most 320 characters")
    # And the service refuses it too, whoever calls it.
    with pytest.raises(review.InvalidReview, match="420 characters; the limit is 320"):
        review.approve(draft.pk, user=people["pharmacist"], final_text="y" * 420)
    draft.refresh_from_db()
    assert draft.status == "draft" and draft.final_text == "" and draft.message.status == "held"


def test_the_card_shows_the_recipient_and_approval_rechecks_it(client, people, drafts, dispatch_not_enqueued):
    draft = drafts["SYN-A"]
    client.force_login(people["pharmacist"])
    queue = client.get("/corrections/review/").content.decode()
    assert "syn-a@example.com" in queue and ">EMAIL<" in queue
    Patient.objects.filter(pk=draft.patient_id).update(email="attacker@evil.example")
    card = client.get(f"/corrections/review/{draft.public_id}/edit/", headers=HTMX).content.decode()
    assert "Check the recipient" in card and "attacker@evil.example" in card
    response = client.post(f"/corrections/review/{draft.public_id}/approve/", headers=HTMX)
    _assert_error_card(response, draft, 409, "contact changed after this was drafted")
    draft.refresh_from_db()
    assert draft.status == "draft" and draft.message.recipient == "syn-a@example.com"
    # The pharmacist checks the change and re-addresses it (audited), then approves.
    response = client.post(f"/corrections/review/{draft.public_id}/use-current-contact/", headers=HTMX)
    assert response.status_code == 200 and "attacker@evil.example" in response.content.decode()
    event = AuditEvent.objects.get(correction=draft, action=AuditEvent.Action.RECIPIENT)
    assert event.before["recipient"] == "syn-a@example.com" and event.after["recipient"] == "attacker@evil.example"
    assert client.post(f"/corrections/review/{draft.public_id}/approve/", headers=HTMX).status_code == 200
    assert OutboxMessage.objects.get(correction=draft).recipient == "attacker@evil.example"


def test_a_channel_change_redrafts_the_letter_for_the_new_channel(people, drafts, settings):
    draft = drafts["SYN-B"]
    Patient.objects.filter(pk=draft.patient_id).update(preferred_channel="sms", phone="+12025550143")
    with pytest.raises(review.RecipientChanged):
        review.approve(draft.pk, user=people["pharmacist"])
    review.use_current_contact(draft.pk, user=people["pharmacist"])
    draft.refresh_from_db()
    message = OutboxMessage.objects.get(correction=draft)
    assert (message.channel, message.recipient) == ("sms", "+12025550143")
    assert len(draft.drafted_text) <= settings.UNSAY_SMS_LIMIT and not draft.drafted_text.startswith("Dear")
    assert message.body == draft.drafted_text


def test_the_queue_pages_per_recall_with_htmx_more(client, people, drafts, settings):
    settings.UNSAY_QUEUE_PAGE = 2
    client.force_login(people["pharmacist"])
    response = client.get("/corrections/review/")
    [group] = response.context["groups"]
    assert group.total == 3 and len(group.drafts) == 2 and group.more_after == group.drafts[-1].id
    assert "showing the first 2" in response.content.decode()
    more = client.get(f"/corrections/review/more/{RECALL}?after={group.more_after}", headers=HTMX)
    rest = more.context["cards"]
    expected = list(Correction.objects.filter(status="draft").order_by("-severity", "created", "id"))
    assert [c.id for c in group.drafts + rest] == [c.id for c in expected]
    assert more.context["more_after"] is None and "Show more" not in more.content.decode()


@pytest.mark.parametrize("raw,stored", [("(202) 555-0143", "+12025550143"), ("+44 20 7946 0958", "+442079460958")])
def test_phone_numbers_are_stored_as_e164(raw, stored):
    assert normalize_phone(raw) == stored


@pytest.mark.parametrize("raw", ["555-1234", "call me", "+1202555014"])
def test_incomplete_phone_numbers_are_refused_with_a_reason(raw):
    with pytest.raises(ValidationError):
        normalize_phone(raw)


def test_patient_clean_normalises_the_phone_and_refuses_a_local_number():
    patient = Patient(region="aws-us-east-1", display_name="Synthetic P", external_ref="SYN-P",
                      preferred_channel="sms", phone="555-1234")
    with pytest.raises(ValidationError) as info:
        patient.full_clean()
    assert "phone" in info.value.message_dict
    patient.phone = "202-555-0143"
    patient.full_clean()
    assert patient.phone == "+12025550143"
    fictional = Patient(region="aws-us-east-1", display_name="Synthetic F", external_ref="SYN-F", synthetic=True,
                        preferred_channel="sms", phone="+1 555 555 0100")
    fictional.full_clean()
    assert fictional.phone == "+15555550100"


def test_the_queue_warns_of_a_changed_recipient_before_approve_and_bulk_approve_names_what_it_skipped(
        client, people, drafts, dispatch_not_enqueued):
    changed = drafts["SYN-A"]
    Patient.objects.filter(pk=changed.patient_id).update(email="moved@example.com")
    client.force_login(people["pharmacist"])
    queue = client.get("/corrections/review/").content.decode()
    card = queue[queue.index(f'id="card-{changed.public_id}"'):]
    card = card[:card.index("</article>")]
    assert "Check the recipient" in card and "moved@example.com" in card  # on the card, before any approve
    others = [d for ref, d in drafts.items() if ref != "SYN-A"]
    assert all("Check the recipient" not in queue[queue.index(f'id="card-{d.public_id}"'):].split("</article>")[0]
               for d in others)
    response = client.post(f"/corrections/review/recall/{RECALL}/approve-all/", {"confirm": "on"}, follow=True)
    body = response.content.decode()
    total = len(drafts)
    assert f"Approved {total - 1} of {total} drafts" in body
    assert f"Not approved: {changed.patient.display_name}: " in body and "contact changed" in body
    changed.refresh_from_db()
    assert changed.status == "draft"


def test_a_redraft_on_the_same_channel_is_the_draft_the_sweep_wrote(drafts):
    """A redraft names the medicine as the draft did (the decision's subject, not the recall's)."""
    for draft in drafts.values():
        channel = draft.patient.contact()[0]
        assert review.redraft(draft, channel=channel) == draft.drafted_text
