"""Read-only admin for facts, decisions and reads, and the decision replay page."""

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from core.retry import run_in_transaction
from core.roles import sync_group_permissions
from memory.decisions import ReadSpec, record_decision
from memory.fact_writes import Claim, assert_claim
from memory.models import Fact


def recall(statement, number="D-0123-2021"):
    return Claim(fact_key=f"recall:{number}:lot:A1", kind="recall", subject="valsartan", lot="A1",
                 statement=statement, source="openfda:enforcement",
                 attributes={"recall_number": number, "classification": "Class II"})


@pytest.fixture
def history(hashing_embeddings):
    v1 = assert_claim(recall("Class II recall of valsartan lot A1")).fact
    v2 = assert_claim(recall("Class I recall of valsartan lot A1"), reason="reclassified").fact
    other = assert_claim(recall("Class III recall of metformin", number="D-0999-2021")).fact
    decision = run_in_transaction(lambda: record_decision(
        question="is my valsartan safe", verdict="stop", answer="Stop.", reasoner="bedrock:model",
        reasoner_verdict="safe", guardrail_override="a lot-level recall matches the patient's lot",
        reads=[ReadSpec(v2, 1, 1.0, True), ReadSpec(other, 2, 0.3)], subject="valsartan"))
    return {"v1": v1, "v2": v2, "other": other, "decision": decision}


def user(username, *, group=None, superuser=False):
    model = get_user_model()
    if superuser:
        return model.objects.create_superuser(username, f"{username}@example.test", "pw")
    account = model.objects.create_user(username, f"{username}@example.test", "pw", is_staff=True)
    if group:
        sync_group_permissions(apps)  # the groups' data migration is undone by transactional tests' flush
        account.groups.add(Group.objects.get(name=group))
    return account


@pytest.mark.django_db(transaction=True)
def test_fact_search_by_recall_number_and_believed_filter(client, history):
    client.force_login(user("root", superuser=True))
    page = client.get("/admin/memory/fact/", {"q": "D-0999"})
    assert page.status_code == 200
    assert list(page.context["cl"].result_list) == [Fact.objects.get(pk=history["other"].pk)]
    retracted = client.get("/admin/memory/fact/", {"believed": "no"})
    assert [f.pk for f in retracted.context["cl"].result_list] == [history["v1"].pk]
    believed = client.get("/admin/memory/fact/", {"kind": "recall", "believed": "yes", "q": "valsartan"})
    assert {f.pk for f in believed.context["cl"].result_list} == {history["v2"].pk, history["other"].pk}


@pytest.mark.django_db(transaction=True)
def test_fact_detail_shows_the_version_chain_and_nothing_is_editable(client, history):
    client.force_login(user("root", superuser=True))
    url = f"/admin/memory/fact/{history['v2'].pk}/change/"
    page = client.get(url)
    body = page.content.decode()
    assert page.status_code == 200
    assert "<b>v2 (this)</b>" in body and f'/admin/memory/fact/{history["v1"].pk}/change/">v1</a>' in body
    assert "reclassified" in body and 'name="_save"' not in body and "embedding" not in body
    assert client.post(url, {"statement": "tampered"}).status_code == 403
    assert client.get("/admin/memory/fact/add/").status_code == 403
    assert client.post(f"/admin/memory/fact/{history['v2'].pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/memory/decision/add/").status_code == 403
    assert client.get("/admin/memory/readset/add/").status_code == 403
    assert Fact.objects.get(pk=history["v2"].pk).statement == "Class I recall of valsartan lot A1"


@pytest.mark.django_db(transaction=True)
def test_decision_page_shows_reads_guardrail_and_links_a_replay_that_renders(client, history):
    client.force_login(user("ann", group="Pharmacist"))
    decision = history["decision"]
    page = client.get(f"/admin/memory/decision/{decision.pk}/change/")
    body = page.content.decode()
    assert page.status_code == 200
    assert "a lot-level recall matches the patient&#x27;s lot" in body
    assert "recall:D-0123-2021:lot:A1 v2" in body and "recall:D-0999-2021:lot:A1 v1" in body
    replay_url = f"/admin/memory/decision/{decision.pk}/replay/"
    assert replay_url in body

    replay = client.get(replay_url)
    text = replay.content.decode()
    assert replay.status_code == 200
    assert "Class I recall of valsartan lot A1" in text and "still believed" in text
    assert "bitemporal route: ok" in text and "unavailable on this engine" in text
    assert client.get("/admin/memory/decision/999999/replay/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_staff_without_memory_permissions_cannot_see_decisions_or_replays(client, history):
    client.force_login(user("bob", group="Pharmacy staff"))
    assert client.get("/admin/memory/fact/").status_code == 200  # staff may look up facts
    assert client.get(f"/admin/memory/decision/{history['decision'].pk}/change/").status_code == 403
    assert client.get(f"/admin/memory/decision/{history['decision'].pk}/replay/").status_code == 403
