"""/metrics: who may scrape it, and Unsay's counters moving after a real sweep (facts built by the
real-record factory, synthetic patients)."""

import re

import pytest
from django.test import Client

from tests.factories import LOT, OTHER_LOT, OTHER_RECALL, RECALL, escalate, make_patient

pytestmark = pytest.mark.django_db(transaction=True)


def scrape(client) -> dict[str, float]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.content[:300]
    values = {}
    for line in response.content.decode().splitlines():
        match = re.match(r"^(unsay_[a-z0-9_]+(?:\{[^}]*\})?) ([0-9.e+-]+)$", line)
        if match:
            values[match.group(1)] = float(match.group(2))
    return values


@pytest.fixture
def staff_client(django_user_model):
    user = django_user_model.objects.create_user("metrics-staff", password="x" * 16, is_staff=True)
    client = Client()
    client.force_login(user)
    return client


def test_metrics_are_refused_to_anonymous_callers_and_served_to_staff_or_the_token(staff_client, settings):
    assert Client().get("/metrics").status_code == 403
    settings.UNSAY_METRICS_TOKEN = "scrape-token-0123456789"
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-0123456789").status_code == 200
    body = staff_client.get("/metrics").content.decode()
    assert "django_http_requests_total_by_method_total" in body  # django-prometheus's own metrics
    assert "unsay_drafts_awaiting_review" in body


def test_a_sweep_moves_the_draft_redecision_and_review_metrics(staff_client, hashing_embeddings, monkeypatch):
    from ask.services import ask
    from corrections.sweep.run import sweep
    from memory.fact_writes import assert_claim
    from outbox import tasks
    from tests.factories import recall_claim

    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)
    monkeypatch.setattr(tasks.dispatch_outbox, "delay", lambda *a, **k: None)
    assert_claim(recall_claim(RECALL, LOT))
    assert_claim(recall_claim(OTHER_RECALL, OTHER_LOT))
    for ref in ("SYN-M1", "SYN-M2"):
        ask(make_patient(ref, [("Valsartan Tablets USP 40 mg", LOT)]), "Is my valsartan safe?")
    before = scrape(staff_client)
    assert before.get('unsay_drafts_total{kind="correction"}', 0) == 0
    assert before["unsay_drafts_awaiting_review"] == 0
    assert before["unsay_oldest_class1_draft_age_seconds"] == 0

    escalate()  # the real record, classification "Class I"
    report = sweep()
    assert report.corrected == 2

    after = scrape(staff_client)
    assert after['unsay_drafts_total{kind="correction"}'] == 2
    assert sum(v for k, v in after.items() if k.startswith("unsay_redecisions_total")) >= 2
    assert after["unsay_drafts_awaiting_review"] == 2
    assert after["unsay_oldest_class1_draft_age_seconds"] > 0
    assert after['unsay_outbox_messages{status="held"}'] == before.get('unsay_outbox_messages{status="held"}', 0) + 2
