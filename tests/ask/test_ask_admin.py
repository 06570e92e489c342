"""ApiKey admin: the secret is shown once on creation and works; scope checks; revoke action."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages

from ask.keys import hash_secret
from ask.models import ApiClient, ApiKey
from tests.factories import make_patient

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_client(client):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw"))
    return client


def test_creating_a_key_shows_the_secret_once_and_stores_only_its_hash(admin_client):
    north = ApiClient.objects.create(name="North")
    response = admin_client.post("/admin/ask/apikey/add/", {"client": north.pk, "kind": "pharmacy", "name": "till"},
                                 follow=True)
    assert response.status_code == 200
    shown = " ".join(str(m) for m in get_messages(response.wsgi_request))
    secret = re.search(r"(usk_\S+)", shown).group(1)
    key = ApiKey.objects.get()
    assert key.key_hash == hash_secret(secret) and key.prefix == secret[:12]
    again = admin_client.get(f"/admin/ask/apikey/{key.pk}/change/").content.decode()
    assert secret not in again and key.prefix in again


def test_a_patient_key_for_another_clients_patient_is_refused(admin_client):
    north, south = ApiClient.objects.create(name="North"), ApiClient.objects.create(name="South")
    patient = make_patient("SYN-F1", name="Synthetic F", email="", phone="", client=south)
    response = admin_client.post("/admin/ask/apikey/add/",
                                 {"client": north.pk, "kind": "patient", "patient": patient.pk, "name": "app"})
    assert response.status_code == 200 and "does not belong to client North" in response.content.decode()
    assert not ApiKey.objects.exists()


def test_the_revoke_action_revokes_and_the_key_stops_working(admin_client, client):
    from ask.keys import issue_key

    key, secret = issue_key(ApiClient.objects.create(name="North"))
    response = admin_client.post("/admin/ask/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    api = client.post("/api/v1/ask", data="{}", content_type="application/json",
                      headers={"Authorization": f"Bearer {secret}"})
    assert api.status_code == 401


def test_the_admin_issues_keys_through_the_key_service_with_the_pharmacist_scope(admin_client, monkeypatch):
    import ask.admin
    from ask import keys

    calls = []
    real = keys.issue_key
    monkeypatch.setattr(ask.admin, "issue_key", lambda *a, **k: calls.append(k) or real(*a, **k))
    north = ApiClient.objects.create(name="North")
    response = admin_client.post("/admin/ask/apikey/add/",
                                 {"client": north.pk, "kind": "pharmacy", "name": "rph", "pharmacist_scope": "on"},
                                 follow=True)
    assert response.status_code == 200 and calls and calls[0]["pharmacist"] is True
    assert ApiKey.objects.get().pharmacist_scope is True

    patient = make_patient("SYN-P1", name="Synthetic P", email="", phone="", client=north)
    refused = admin_client.post("/admin/ask/apikey/add/", {"client": north.pk, "kind": "patient",
                                                              "patient": patient.pk, "pharmacist_scope": "on"})
    assert "cannot have the pharmacist scope" in refused.content.decode() and ApiKey.objects.count() == 1
