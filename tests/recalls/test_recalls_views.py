"""Operations page, admin views of runs and quarantine, labels, and the weekly schedule."""

import copy
import json

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from core.roles import PHARMACIST
from memory.models import Fact
from recalls.models import IngestRun, QuarantinedRecord
from tests.paths import OPENFDA as FIXTURES


def _user(django_user_model, name, **flags):
    return django_user_model.objects.create_user(username=name, password="pw-not-secret", **flags)


def _runs():
    running = IngestRun.objects.create(source="api", status="running", started=timezone.now(), total=400,
                                       fetched=120, new_facts=300, source_ref="report_date:[20260101 TO 20260107]")
    done = IngestRun.objects.create(source="file", status="succeeded", started=timezone.now(), fetched=3874,
                                    new_versions=2038, quarantined=2, duration_seconds=10.0)
    return running, done


@pytest.mark.django_db
def test_ops_page_needs_login_and_a_pharmacy_role(client, django_user_model):
    response = client.get("/recalls/ops/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    client.force_login(_user(django_user_model, "outsider"))
    assert client.get("/recalls/ops/").status_code == 403


@pytest.mark.django_db
def test_ops_page_lists_runs_and_polls_with_htmx(client, django_user_model):
    pharmacist = _user(django_user_model, "pharmacist")
    pharmacist.groups.add(Group.objects.get(name=PHARMACIST))
    client.force_login(pharmacist)
    running, done = _runs()
    page = client.get("/recalls/ops/")
    html = page.content.decode()
    assert page.status_code == 200 and "<html" in html
    assert f"#{running.pk}" in html and f"#{done.pk}" in html
    assert "120 / 400" in html and "2038" in html and "387/s" in html
    assert 'hx-trigger="every 2s"' in html  # polls fast while a run is going
    partial = client.get("/recalls/ops/", HTTP_HX_REQUEST="true")
    fragment = partial.content.decode()
    assert partial.status_code == 200 and "<html" not in fragment and 'id="ingest-runs"' in fragment
    running.status, running.fetched = "succeeded", 400
    running.save()
    assert 'hx-trigger="every 15s"' in client.get("/recalls/ops/", HTTP_HX_REQUEST="true").content.decode()


@pytest.mark.django_db
def test_staff_can_see_ops_and_read_only_admin(client, django_user_model):
    admin = _user(django_user_model, "boss", is_staff=True, is_superuser=True)
    client.force_login(admin)
    _, done = _runs()
    QuarantinedRecord.objects.create(run=done, recall_number="D-0122-2021", drug="Azacitidine for Injection",
                                     code_info="Lot 7S10185A", reason="duplicate", raw={"recall_number": "D-0122-2021"})
    assert client.get("/recalls/ops/").status_code == 200
    for query in ("D-0122-2021", "Azacitidine", "7S10185A"):  # recall number, drug, lot
        listing = client.get("/admin/recalls/quarantinedrecord/", {"q": query})
        assert listing.status_code == 200 and "D-0122-2021" in listing.content.decode()
    assert client.get("/admin/recalls/quarantinedrecord/", {"q": "nothing-like-this"}).content.decode().count(
        "D-0122-2021") == 0
    assert client.get("/admin/recalls/ingestrun/add/").status_code == 403
    assert client.get(f"/admin/recalls/ingestrun/{done.pk}/change/").status_code == 200


@pytest.mark.django_db
def test_weekly_ingest_is_scheduled_in_celery_beat():
    from django_celery_beat.models import PeriodicTask

    task = PeriodicTask.objects.get(task="recalls.tasks.ingest_openfda")
    assert task.enabled and task.crontab is not None
    assert (task.crontab.day_of_week, task.crontab.hour, task.crontab.minute) == ("1", "6", "15")


@pytest.mark.django_db(transaction=True)
def test_label_warnings_become_versioned_label_facts(hashing_embeddings):
    from recalls.services import ingest_document, ingest_file

    run = ingest_file(FIXTURES / "drug-label-sample.json", kind=IngestRun.Kind.LABEL)
    assert run.status == "succeeded" and run.quarantined == 0
    humira = "608d4f0d-b19f-46d3-749a-7159aa5f933d"
    boxed = Fact.objects.get(fact_key=f"label:{humira}:boxed_warning")
    assert boxed.kind == "label" and boxed.subject == "adalimumab" and boxed.lot is None
    assert boxed.attributes["label_version"] == 1893 and boxed.attributes["set_id"] == humira
    assert boxed.statement.startswith("Boxed warning on the Humira (ADALIMUMAB) label (version 1893")
    assert Fact.objects.filter(fact_key=f"label:{humira}:warnings").exists()  # from warnings_and_cautions
    assert Fact.objects.filter(fact_key="label:0000025c-6dbf-4af7-a741-5cbacaed519a:warnings").exists()
    calls = hashing_embeddings.calls
    again = ingest_file(FIXTURES / "drug-label-sample.json", kind=IngestRun.Kind.LABEL)
    assert (again.new_facts, again.new_versions, again.unchanged) == (0, 0, 2) and hashing_embeddings.calls == calls
    # A later revision of the real HUMIRA label (version bumped in a copy) versions both sections;
    # an older revision arriving afterwards changes nothing.
    document = json.loads((FIXTURES / "drug-label-sample.json").read_text())
    newer = copy.deepcopy(document["results"][0]) | {"version": "1894", "id": "revision-1894"}
    assert ingest_document({"results": [newer]}, kind=IngestRun.Kind.LABEL).new_versions == 2
    older = copy.deepcopy(document["results"][0]) | {"version": "1000"}
    assert ingest_document({"results": [older]}, kind=IngestRun.Kind.LABEL).new_versions == 0
    assert Fact.objects.get(fact_key=f"label:{humira}:boxed_warning", retracted_at__isnull=True).version == 2
