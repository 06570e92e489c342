"""Reply links: every sent letter (email and SMS) carries a signed, expiring, single-answer link to a page
where the patient answers; the answer lands on their recall row and, when a pharmacist must act, as a task.
Real sweep drafts of the real D-0315-2019 recall escalated to Class I (tests/conftest.py drafts); patients
synthetic."""

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.core.cache import cache
from django.utils import timezone

from corrections.review import approve
from outbox import dispatch
from replies.models import ReplyLink
from tests.factories import RECALL
from worklist import services as worklist_services
from worklist.models import PatientAnswer, PatientTask

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]

LINK = re.compile(r"https?://[^\s]+/r/([A-Za-z0-9_-]{22})")


@pytest.fixture(autouse=True)
def fresh_rate_limit():
    cache.clear()
    yield
    cache.clear()


class FakeSNS:
    def __init__(self):
        self.sent = []

    def publish(self, **kwargs):
        self.sent.append(kwargs)
        return {"MessageId": f"sns-{len(self.sent)}"}


def send(correction, user, **kwargs):
    approve(correction.pk, user=user)
    result = dispatch.dispatch_ready(**kwargs)
    assert result.sent == 1
    return result


def sent_link(correction, people):
    send(correction, people["pharmacist"])
    [email] = mail.outbox
    return LINK.search(email.body).group(1)


def test_it_puts_a_reply_link_in_a_sent_email_with_nothing_about_the_patient_in_it(drafts, people):
    a = drafts["SYN-A"]
    send(a, people["pharmacist"])
    [email] = mail.outbox
    assert email.body.startswith(a.drafted_text.strip())  # the reviewed letter, then the link
    url = LINK.search(email.body).group(0)
    assert "no password needed" in email.body
    [(html, _)] = email.alternatives
    assert f'href="{url}"' in html  # a real link in the HTML part
    for secret in (str(a.patient.public_id), a.patient.external_ref, RECALL, str(a.public_id)):
        assert secret not in url
    link = ReplyLink.objects.get()
    assert link.message.correction_id == a.pk and link.used_at is None
    assert LINK.search(email.body).group(1) not in link.token_hash  # only the hash is kept


def test_it_puts_the_same_link_in_an_sms(drafts, people, settings):
    settings.UNSAY_SNS_ENABLED = True
    sns = FakeSNS()
    send(drafts["SYN-D"], people["pharmacist"], sms_client=sns)
    [published] = sns.sent
    assert published["PhoneNumber"] == drafts["SYN-D"].patient.phone
    token = LINK.search(published["Message"]).group(1)
    assert "Tell us:" in published["Message"]
    assert ReplyLink.objects.get().message.correction_id == drafts["SYN-D"].pk
    assert token


def test_it_records_the_answer_on_the_patients_recall_row(client, drafts, people):
    a = drafts["SYN-A"]
    token = sent_link(a, people)
    page = client.get(f"/r/{token}")
    assert page.status_code == 200
    html = page.content.decode()
    for label in ("I have stopped using it", "I returned it to the pharmacy", "I still have it", "I have a question"):
        assert label in html
    assert '<label for="id_answer_0"' in html and 'for="id_text"' in html  # every control is labelled
    assert "<script" not in html  # works without JavaScript
    assert a.patient.display_name not in html and "valsartan" not in html.lower()  # nothing about the patient
    done = client.post(f"/r/{token}", {"answer": "returned"})
    assert done.status_code == 200 and "Thank you" in done.content.decode()
    [answer] = PatientAnswer.objects.all()
    assert (answer.recall_number, answer.patient_id, answer.correction_id, answer.answer) == (
        RECALL, a.patient_id, a.pk, "returned")
    assert not PatientTask.objects.exists()  # returned: nothing for a pharmacist to do
    assert ReplyLink.objects.get().used_at is not None
    row = client.get(f"/worklist/recall/{RECALL}")
    assert row.status_code == 302  # the worklist is for pharmacists
    client.force_login(people["pharmacist"])
    row = client.get(f"/worklist/recall/{RECALL}").content.decode()
    assert "I returned it to the pharmacy" in row


def test_the_same_answer_again_is_a_retry_and_any_other_use_is_refused(client, drafts, people):
    token = sent_link(drafts["SYN-A"], people)
    first = client.post(f"/r/{token}", {"answer": "stopped"})
    again = client.post(f"/r/{token}", {"answer": "stopped"})
    assert first.status_code == again.status_code == 200
    assert PatientAnswer.objects.count() == 1
    other = client.post(f"/r/{token}", {"answer": "still_have"})
    assert other.status_code == 404
    assert client.get(f"/r/{token}").status_code == 404  # a used link does not show the form again
    assert list(PatientAnswer.objects.values_list("answer", flat=True)) == ["stopped"]


def test_forged_expired_and_used_links_are_refused_alike(client, drafts, people):
    token = sent_link(drafts["SYN-A"], people)
    forged = client.get("/r/" + "A" * 22)
    tampered = client.get("/r/" + token[:-1] + ("A" if token[-1] != "A" else "B"))
    malformed = client.get("/r/not-a-token")
    ReplyLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = client.get(f"/r/{token}")
    expired_post = client.post(f"/r/{token}", {"answer": "stopped"})
    ReplyLink.objects.update(expires_at=timezone.now() + timedelta(days=1))
    client.post(f"/r/{token}", {"answer": "stopped"})
    used = client.get(f"/r/{token}")
    responses = [forged, tampered, malformed, expired, expired_post, used]
    assert {r.status_code for r in responses} == {404}
    assert len({r.content for r in responses}) == 1  # byte for byte the same page
    assert PatientAnswer.objects.count() == 1


def test_a_link_of_a_message_never_sent_is_refused(client, drafts, people):
    from corrections.models import OutboxMessage
    from replies import links

    message = OutboxMessage.objects.get(correction=drafts["SYN-B"])  # held, never approved
    _, token = links.link_for(message)
    assert client.get(f"/r/{token}").status_code == 404


def test_a_question_and_still_having_a_class_i_pack_become_pharmacist_tasks(client, drafts, people):
    a, b = drafts["SYN-A"], drafts["SYN-B"]
    token_a = sent_link(a, people)
    mail.outbox.clear()
    token_b = sent_link(b, people)
    assert client.post(f"/r/{token_a}", {"answer": "question"}).status_code == 400  # a question needs its text
    assert client.post(f"/r/{token_a}", {"answer": "question", "text": "x" * 1001}).status_code == 400
    assert client.post(f"/r/{token_a}", {"answer": "question", "text": "Bad\x00byte"}).status_code == 400
    assert client.post(f"/r/{token_a}", {"answer": "question", "text": "Can I take the\nnew pack?"}).status_code == 200
    assert client.post(f"/r/{token_b}", {"answer": "still_have"}).status_code == 200
    tasks = {t.patient_id: t for t in PatientTask.objects.filter(done_at=None)}
    assert tasks[a.patient_id].reason == "question" and tasks[a.patient_id].answer.text == "Can I take the\nnew pack?"
    assert tasks[b.patient_id].reason == "still_have"  # the recall is Class I (escalated)
    client.force_login(people["staff"])  # pharmacy staff do not work recall tasks
    assert client.post(f"/worklist/task/{tasks[a.patient_id].public_id}/").status_code == 403
    assert PatientTask.objects.get(pk=tasks[a.patient_id].pk).done_at is None
    client.force_login(people["pharmacist"])
    page = client.get(f"/worklist/recall/{RECALL}").content.decode()
    assert "The patient asked a question" in page and "Can I take the" in page
    queue = client.get("/worklist/follow-up/").content.decode()
    assert "The patient still has a Class I recalled pack" in queue and "Can I take the" in queue
    assert client.post(f"/worklist/task/{tasks[a.patient_id].public_id}/").status_code == 302
    assert PatientTask.objects.get(pk=tasks[a.patient_id].pk).done_by == people["pharmacist"]


def test_a_patient_who_stopped_the_medicine_is_not_told_nothing_more_is_needed(client, drafts, people):
    """They may be without a medicine they need, or have stopped one that must not be stopped suddenly: a
    pharmacist follows up, and the page says so; "I still have it" is not told to keep the pack the letter
    may have asked them to bring back."""
    a, b = drafts["SYN-A"], drafts["SYN-B"]
    b.patient.preferred_language = "es"
    b.patient.save(update_fields=["preferred_language"])
    token_a = sent_link(a, people)
    mail.outbox.clear()
    token_b = sent_link(b, people)
    done = client.post(f"/r/{token_a}", {"answer": "stopped"}).content.decode()
    assert "do not need to do anything" not in done
    assert "A pharmacist will contact you about a replacement" in done and "call us today" in done
    done_es = client.post(f"/r/{token_b}", {"answer": "stopped"}).content.decode()
    assert "No necesita hacer nada" not in done_es and "llámenos hoy" in done_es
    tasks = {t.patient_id: t.reason for t in PatientTask.objects.filter(done_at=None)}
    assert tasks == {a.patient_id: "stopped", b.patient_id: "stopped"}
    client.force_login(people["pharmacist"])
    assert "The patient has stopped the medicine" in client.get("/worklist/follow-up/").content.decode()


def test_still_having_the_pack_is_not_told_to_keep_it(client, drafts, people):
    token = sent_link(drafts["SYN-A"], people)
    done = client.post(f"/r/{token}", {"answer": "still_have"}).content.decode()
    assert "keep the pack" not in done.lower() and "follow the advice in our letter" in done


def test_replies_are_rate_limited_per_link_and_guesses_per_client(client, drafts, people, settings):
    token = sent_link(drafts["SYN-A"], people)
    settings.UNSAY_REPLY_RATE = 3
    assert [client.get("/r/" + "A" * 22).status_code for _ in range(4)] == [404, 404, 404, 429]
    # A patient behind the same address (a shared proxy) still reaches their own link, a few times.
    assert [client.get(f"/r/{token}").status_code for _ in range(3)] == [200, 200, 200]
    assert client.post(f"/r/{token}", {"answer": "stopped"}).status_code == 429
    assert not PatientAnswer.objects.exists()


def test_a_letter_nobody_answered_gets_one_follow_up_task(client, drafts, people, settings):
    a = drafts["SYN-A"]
    token = sent_link(a, people)
    mail.outbox.clear()
    send(drafts["SYN-B"], people["pharmacist"])
    client.post(f"/r/{token}", {"answer": "stopped"})
    assert worklist_services.open_no_reply_tasks(days=7) == 0  # sent today
    later = timezone.now() + timedelta(days=8)
    assert worklist_services.open_no_reply_tasks(days=7, now=later) == 1  # B only: A answered
    assert worklist_services.open_no_reply_tasks(days=7, now=later) == 0  # once
    [task] = PatientTask.objects.filter(reason="no_reply")
    assert task.patient_id == drafts["SYN-B"].patient_id


def test_a_spanish_patients_letter_link_and_page_are_in_spanish(client, drafts, people):
    a = drafts["SYN-A"]
    a.patient.preferred_language = "es"
    a.patient.save(update_fields=["preferred_language"])
    token = sent_link(a, people)
    [email] = mail.outbox
    assert "Díganos qué hizo con este medicamento" in email.body
    page = client.get(f"/r/{token}").content.decode()
    assert 'lang="es"' in page and "Dejé de usarlo" in page
    done = client.post(f"/r/{token}", {"answer": "stopped"}).content.decode()
    assert "Gracias" in done


def test_the_recall_report_counts_notified_delivered_replies_and_silence_and_exports_them(client, drafts, people):
    import csv
    import io

    from django.core.management import call_command

    a, b = drafts["SYN-A"], drafts["SYN-B"]
    token = sent_link(a, people)
    mail.outbox.clear()
    send(b, people["pharmacist"])
    client.post(f"/r/{token}", {"answer": "still_have"})
    from corrections.models import OutboxMessage

    OutboxMessage.objects.filter(correction=b).update(sent_at=timezone.now() - timedelta(days=30))
    out = io.StringIO()
    call_command("reply_follow_ups", stdout=out)
    assert "follow-up tasks opened: 1" in out.getvalue()
    client.force_login(people["pharmacist"])
    page = client.get(f"/worklist/report/{RECALL}").content.decode()
    for cell, n in (("n-letters", 2), ("n-delivered", 2), ("n-replied", 1), ("n-replied-still-have", 1),
                    ("n-replied-question", 0)):
        assert f'<td id="{cell}">{n}</td>' in page, cell
    assert '<td id="n-no-reply">1 (1 open follow-up task)</td>' in page
    assert '<td id="n-tasks">2</td>' in page  # B's follow-up and A's Class I pack still held
    [row] = list(csv.DictReader(io.StringIO(client.get(f"/worklist/replies.csv/{RECALL}").content.decode())))
    assert (row["notified"], row["delivered"], row["replied_still_have"], row["no_reply"],
            row["follow_up_tasks_open"]) == ("2", "2", "1", "1", "1")


def test_the_demo_sends_two_letters_and_records_a_reply(drafts, people, monkeypatch):
    import io

    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from core.roles import PHARMACIST

    monkeypatch.setattr("demo.patients.DEMO_RECALL_NUMBER", RECALL)
    demo = type(people["pharmacist"]).objects.create_user("pharmacist", password="pw")
    demo.groups.add(Group.objects.get(name=PHARMACIST))
    out = io.StringIO()
    call_command("demo_reply", stdout=out)
    assert "answered through the letter's link" in out.getvalue() and "/r/" in out.getvalue()
    [answer] = PatientAnswer.objects.all()
    assert answer.answer == "question" and PatientTask.objects.get().reason == "question"
    assert len(mail.outbox) == 2
    call_command("demo_reply", stdout=out)  # again: nothing new
    assert PatientAnswer.objects.count() == 1 and len(mail.outbox) == 2


def test_erasing_the_patient_blanks_the_words_of_their_question(client, drafts, people):
    from privacy.services import erase_patient

    a = drafts["SYN-A"]
    token = sent_link(a, people)
    client.post(f"/r/{token}", {"answer": "question", "text": "My name is Synthetic SYN-A and I live at 1 Elm Road"})
    erase_patient(a.patient, by="operator", reason="patient request")
    [answer] = PatientAnswer.objects.all()
    assert (answer.answer, answer.text) == ("question", "")
