"""`manage.py demo_reply`: the demo pharmacist approves two of the demo recall's letters and they are sent;
the first patient answers through the letter's link ("I have a question"), which lands on their recall row
with a task; the second letter's link is printed for you to answer in a browser. Idempotent."""

from django.contrib.auth import get_user_model

from core.commands import MigratedCommand
from corrections.models import Correction, OutboxMessage
from corrections.review import approve
from demo.patients import DEMO_RECALL_NUMBER
from outbox import dispatch
from replies import links, services
from worklist.models import PatientAnswer

QUESTION = "Can I keep taking it until I can come in on Friday?"


class Command(MigratedCommand):
    help = "Demo: send two letters of the demo recall and record a patient's reply through its link."

    def handle(self, *args, **options):
        answered = PatientAnswer.objects.filter(recall_number=DEMO_RECALL_NUMBER).first()
        if answered:
            self.stdout.write(f"A reply is already recorded for {DEMO_RECALL_NUMBER} (patient #{answered.patient_id}: "
                              f"{answered.get_answer_display()}); see /worklist/recall/{DEMO_RECALL_NUMBER}")
            return
        pharmacist = get_user_model().objects.filter(username="pharmacist").first()
        drafts = list(Correction.objects.pending_review().filter(recall_number=DEMO_RECALL_NUMBER,
                                                                 patient__preferred_channel="email")
                      .order_by("patient__external_ref")[:2])
        if pharmacist is None or len(drafts) < 2:
            self.stdout.write("skipped: needs the demo `pharmacist` login and two drafts of the demo recall")
            return
        for draft in drafts:
            approve(draft.pk, user=pharmacist)
        dispatch.dispatch_ready()
        sent = {m.correction_id: m for m in OutboxMessage.objects.filter(correction__in=drafts, status="sent")}
        if len(sent) < 2:
            self.stdout.write("skipped: the letters were not sent (see the outbox in the admin)")
            return
        first, second = (sent[d.pk] for d in drafts)
        link, _token = links.link_for(first)
        services.record_reply(link, "question", text=QUESTION)
        _, token = links.link_for(second)
        self.stdout.write(self.style.SUCCESS(
            f"Sent 2 letters (email, written to var/mail/). Patient #{first.correction.patient_id} answered through "
            f"the letter's link: “I have a question” — recorded on their row with a task for the pharmacist: "
            f"/worklist/recall/{DEMO_RECALL_NUMBER}"))
        self.stdout.write(f"Answer the other letter yourself (no login): {links.url_for(token)}")
