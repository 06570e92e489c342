"""End to end on real recall records: ingest a slice of the real openFDA 2021 file, seed the demo
patients (synthetic), they ask, the real demo lot is escalated to Class I through recalls.services,
the after-commit trigger sweeps, a pharmacist approves some drafts and rejects one, dispatch sends
exactly the approved ones. Also: demo_story twice writes no duplicate drafts."""

import io
import json
import zipfile

import boto3
import pytest
from botocore.stub import ANY, Stubber
from django.core import mail
from django.core.management import call_command

from ask.services import ask
from corrections import tasks
from corrections.models import Correction, OutboxMessage, Redecision, SweepRun
from corrections.sweep.run import count_stale
from memory.models import Decision, Fact
from outbox import dispatch
from tests.factories import FIXTURES

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


@pytest.fixture
def real_slice(tmp_path, hashing_embeddings, monkeypatch):
    """Every valsartan record of the real 2021 openFDA file (the demo recall among them)."""
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)  # ingest: nothing to sweep
    with zipfile.ZipFile(FIXTURES / "drug-enforcement-2021-04-28.json.zip") as archive:
        data = json.loads(archive.read(archive.namelist()[0]))
    records = [r for r in data["results"] if "valsartan" in r["product_description"].lower()]
    path = tmp_path / "valsartan-2021.json"
    path.write_text(json.dumps({"meta": data.get("meta", {}), "results": records}))
    call_command("ingest_recalls", "--file", str(path), "--no-progress", stdout=io.StringIO())
    call_command("seed_demo", stdout=io.StringIO())
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", None)


def test_escalation_to_review_to_dispatch(real_slice, people, client, settings, monkeypatch):
    from demo.escalation import escalate
    from demo.patients import DEMO_EXPOSED_REFS, DEMO_LOT, DEMO_NEIGHBOUR_REFS, DEMO_RECALL_NUMBER
    from patients.models import Patient

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    phrasings = ["Is my valsartan safe?", "Should I keep taking my blood pressure pills?"]
    for i, patient in enumerate(Patient.objects.filter(external_ref__in=DEMO_EXPOSED_REFS + DEMO_NEIGHBOUR_REFS)):
        ask(patient, phrasings[i % 2])
    lot_fact = Fact.objects.believed().get(fact_key=f"recall:{DEMO_RECALL_NUMBER}:lot:{DEMO_LOT}")
    readers = set(Decision.objects.filter(read_set__members__fact=lot_fact, read_set__members__load_bearing=True)
                  .values_list("id", flat=True))
    before = dict(Decision.objects.values_list("id", "verdict"))
    assert {before[d] for d in readers} >= {"caution"}

    # The real trigger path: escalate commits, the listener enqueues, the task sweeps.
    monkeypatch.setattr(tasks.sweep_facts, "delay", lambda fact_ids: tasks.sweep_facts(fact_ids))
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", True)  # opt-in when Celery is eager
    escalate(DEMO_RECALL_NUMBER, "Class I", lot=DEMO_LOT, by="test")

    run = SweepRun.objects.get(trigger=SweepRun.Trigger.SUPERSESSION)
    assert run.status == "succeeded" and run.examined == len(readers) and count_stale() == 0
    outcomes = dict(Redecision.objects.values_list("old_decision_id", "outcome"))
    assert set(outcomes) == readers  # exactly the decisions that rested on the escalated version
    for old_id, outcome in outcomes.items():
        new = Redecision.objects.get(old_decision_id=old_id).new_decision
        assert (outcome == "corrected") == (new.verdict != before[old_id])
    corrected = Correction.objects.filter(kind="correction")
    assert corrected.count() == sum(1 for o in outcomes.values() if o == "corrected") == len(DEMO_EXPOSED_REFS)
    assert {c.patient.external_ref for c in corrected} == set(DEMO_EXPOSED_REFS)
    assert all((c.old_verdict, c.new_verdict) == ("caution", "stop") for c in corrected)

    client.force_login(people["pharmacist"])
    settings.UNSAY_QUEUE_PAGE = 50  # every card on the first page (paging is tested in test_review_errors)
    queue = client.get("/corrections/review/")
    for c in corrected:
        assert f'id="card-{c.public_id}"' in queue.content.decode()
    drafts = list(corrected.order_by("id"))
    approved, rejected = drafts[:5], drafts[5]
    for c in approved:
        response = client.post(f"/corrections/review/{c.public_id}/approve/", headers={"HX-Request": "true"})
        assert response.status_code == 200
    response = client.post(f"/corrections/review/{rejected.public_id}/reject/", {"reason": "called the patient"})
    assert response.status_code == 302

    settings.UNSAY_SNS_ENABLED = True
    sms = boto3.client("sns", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
    sms_approved = [c for c in approved if c.patient.preferred_channel == "sms"]
    with Stubber(sms) as stubber:
        for i, c in enumerate(sms_approved):
            stubber.add_response("publish", {"MessageId": f"sns-{i}"},
                                 {"PhoneNumber": c.patient.phone, "Message": ANY, "MessageAttributes": ANY})
        result = dispatch.dispatch_ready(sms_client=sms)
        stubber.assert_no_pending_responses()

    assert result.sent == len(approved)
    assert set(OutboxMessage.objects.filter(status="sent").values_list("correction_id", flat=True)) == {
        c.id for c in approved}
    emailed = {c.patient.email for c in approved if c.patient.preferred_channel == "email"}
    assert {m.to[0] for m in mail.outbox} == emailed
    assert OutboxMessage.objects.get(correction=rejected).status == "cancelled"
    assert Correction.objects.filter(status="draft").count() == len(drafts) - len(approved) - 1


def test_demo_story_twice_drafts_nothing_twice(real_slice):
    out = io.StringIO()
    call_command("demo_story", stdout=out)
    first = out.getvalue()
    assert "Escalated recall:D-0326-2019:lot:3069020 (the demo patients' lot): Class II -> Class I" in first
    # The twelve exposed answers move (caution -> stop). Neighbours on lots this recall does not
    # name rest on no fact of it (their premises are their own lots), so nobody else is re-decided.
    assert "corrected 12" in first and "/corrections/review/" in first
    reaffirmed = int(first.split("reaffirmed ")[1].split(",")[0])
    assert reaffirmed == 0
    drafts = set(Correction.objects.values_list("dedupe_key", flat=True))

    again = io.StringIO()
    call_command("demo_story", stdout=again)

    assert "already Class I" in again.getvalue() and "0 question(s) asked" in again.getvalue()
    assert set(Correction.objects.values_list("dedupe_key", flat=True)) == drafts
