"""The embedding backlog where operators and scripts see it: the operations page (a progress bar and the
backlog count, polling while there is a backlog), `manage.py status`, and `ingest_recalls --wait-embeddings`.
Real openFDA records (the recent sample file)."""

import io
import json

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command

from core.roles import PHARMACIST
from memory import vectors
from memory.models import Fact
from tests.factories import RECALL, recall_claims_of
from tests.paths import OPENFDA

SAMPLE = OPENFDA / "drug-enforcement-recent-sample.json"

pytestmark = pytest.mark.django_db(transaction=True)


def _pharmacist_client(client, django_user_model):
    user = django_user_model.objects.create_user(username="pharmacist", password="pw-not-secret")
    user.groups.add(Group.objects.get(name=PHARMACIST))
    client.force_login(user)
    return client


def _sample_file(tmp_path, n=12):
    document = json.loads(SAMPLE.read_text())
    document["results"] = document["results"][:n]
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(document))
    return path


def test_the_ops_page_shows_the_backlog_with_a_progress_bar_and_polls_until_it_is_empty(
        client, django_user_model, hashing_embeddings):
    from memory.fact_writes import assert_claims

    client = _pharmacist_client(client, django_user_model)
    written = len(assert_claims(recall_claims_of(RECALL) + recall_claims_of("D-0326-2019")))
    html = client.get("/recalls/ops/").content.decode()
    assert f'<progress id="embedding-progress" max="{written}" value="0">' in html
    assert f"{written} waiting for their vector" in html
    assert 'hx-trigger="every 2s"' in html  # a backlog polls fast, as a running ingest does
    vectors.embed_backlog()
    fragment = client.get("/recalls/ops/", HTTP_HX_REQUEST="true").content.decode()
    assert f'max="{written}" value="{written}"' in fragment and "No backlog." in fragment
    assert "(100%)" in fragment and 'hx-trigger="every 15s"' in fragment


def test_status_reports_the_backlog(hashing_embeddings):
    from memory.fact_writes import assert_claims

    written = len(assert_claims(recall_claims_of(RECALL)))
    out = io.StringIO()
    call_command("status", stdout=out)
    lines = out.getvalue().splitlines()
    assert f"embeddings.backlog: {written}" in lines and "embeddings.percent_embedded: 0" in lines
    vectors.embed_backlog()
    out = io.StringIO()
    call_command("status", "--json", stdout=out)
    embeddings = json.loads(out.getvalue())["embeddings"]
    assert embeddings["backlog"] == 0 and embeddings["with_vector"] == embeddings["believed_facts"] == written


def test_ingest_leaves_the_backlog_to_a_worker_and_wait_embeddings_returns_with_none_left(
        tmp_path, settings, hashing_embeddings):
    settings.UNSAY_EMBED_ON_COMMIT = True  # as with a broker: each commit queues the task for a worker
    path = _sample_file(tmp_path)
    queued, out = [], io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("memory.tasks.embed_facts.delay", lambda: queued.append(1))  # the worker is elsewhere
        call_command("ingest_recalls", "--file", str(path), "--no-progress", stdout=out)
    left = vectors.backlog().count()
    assert left == Fact.objects.believed().count() > 0 and queued
    assert f"Embeddings: {left} fact versions wait for their vector" in out.getvalue()
    assert hashing_embeddings.calls == 0

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("memory.tasks.embed_facts.delay", lambda: queued.append(1))
        call_command("ingest_recalls", "--file", str(path), "--no-progress", "--wait-embeddings", stdout=out)
    assert not vectors.backlog().exists()
    assert f"Embeddings: {left} fact versions embedded" in out.getvalue() and "; 0 left." in out.getvalue()


def test_without_a_broker_the_command_embeds_at_its_end(tmp_path, settings, hashing_embeddings):
    settings.UNSAY_EMBED_ON_COMMIT = None
    settings.CELERY_TASK_ALWAYS_EAGER = True  # no broker, whatever this run has: no worker would embed
    call_command("ingest_recalls", "--file", str(_sample_file(tmp_path, 5)), "--no-progress", stdout=io.StringIO())
    assert Fact.objects.believed().exists() and not vectors.backlog().exists()
