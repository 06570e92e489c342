"""The pharmacist ask screen: roles (anonymous, staff, pharmacist, superuser), plain POST and htmx."""


import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from core.roles import PHARMACIST, PHARMACY_STAFF
from memory.fact_writes import assert_claim
from memory.models import Decision
from tests.factories import make_patient, recall_claim

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/memory/ask/"


def user(name, group=None, **flags):
    u = get_user_model().objects.create_user(name, password="pw", **flags)
    if group:
        u.groups.add(Group.objects.get_or_create(name=group)[0])
    return u


@pytest.fixture
def patient(hashing_embeddings):
    assert_claim(recall_claim("D-0081-2019", "MON17384"))
    p = make_patient("SYN-D1", [("montelukast", "MON17384")], name="Synthetic Dana Reyes", email="", phone="")
    return p


def test_anonymous_is_sent_to_login_and_nothing_is_asked(client, patient):
    response = client.post(URL, {"patient": patient.public_id, "question": "safe?"})
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert Decision.objects.count() == 0


@pytest.mark.parametrize("flags", [{"group": PHARMACY_STAFF, "is_staff": True}, {"is_staff": True}, {}])
def test_non_pharmacists_get_403_even_staff(client, patient, flags):
    client.force_login(user("someone", **flags))
    assert client.get(URL).status_code == 403
    assert client.post(URL, {"patient": patient.public_id, "question": "safe?"}).status_code == 403
    assert Decision.objects.count() == 0


@pytest.mark.parametrize("who", ["pharmacist", "superuser"])
def test_pharmacist_and_superuser_ask_with_a_plain_post_and_get_the_full_page(client, patient, who):
    u = user("ph", group=PHARMACIST) if who == "pharmacist" else user("root", is_superuser=True, is_staff=True)
    client.force_login(u)
    page = client.post(URL, {"q": "dana"})  # the search is a POST: no names in URLs
    assert page.status_code == 200 and "SYN-D1" in page.content.decode()

    response = client.post(URL, {"patient": patient.public_id, "question": "Is my montelukast safe?"})
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    decision = Decision.objects.get(patient_id=patient.pk)
    assert decision.verdict == "stop"
    assert "recall:D-0081-2019:lot:MON17384" in html and "v1" in html and "load-bearing" in html
    assert str(decision.public_id) in html
    assert f"/admin/memory/decision/{decision.pk}/replay/" in html


def test_htmx_post_returns_only_the_result_fragment(client, patient):
    client.force_login(user("ph", group=PHARMACIST))
    response = client.post(URL, {"patient": patient.public_id, "question": "Is my montelukast safe?"},
                           headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html and 'id="result"' in html
    assert "Stop — contact the pharmacy" in html


def test_htmx_patient_search_returns_the_options_fragment(client, patient):
    client.force_login(user("ph", group=PHARMACIST))
    response = client.post(URL, {"q": "SYN-D"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "<html" not in html and 'id="patient-options"' in html and str(patient.public_id) in html


def test_a_missing_patient_or_question_shows_errors_and_writes_nothing(client, patient):
    client.force_login(user("ph", group=PHARMACIST))
    response = client.post(URL, {"question": "safe?"})
    assert response.status_code == 200 and "Pick a patient first." in response.content.decode()
    response = client.post(URL, {"patient": patient.public_id, "question": ""})
    assert "required" in response.content.decode()
    assert client.get(URL, {"patient": "not-a-uuid"}).status_code == 200
    assert Decision.objects.count() == 0


def test_patient_search_never_puts_a_name_in_a_url(client, patient):
    client.force_login(user("ph", group=PHARMACIST))
    page = client.get(URL, {"q": "dana"}).content.decode()
    assert "SYN-D1" not in page  # a name in the query string is ignored, not searched
    html = client.post(URL, {"q": "dana\x00"}).content.decode()  # NUL dropped, not a DataError
    assert 'method="post"' in html and "hx-post" in html and "hx-get" not in html
    assert f"?patient={patient.public_id}\"" in html and "&q=" not in html


def test_a_question_naming_two_medicines_is_answered_per_medicine_on_the_screen(client, patient):
    """Synthetic patient holding a recalled montelukast lot (D-0081-2019, real) and a losartan lot no recall
    names: one question about both gets two decisions, each shown with its own verdict."""
    holder = make_patient("SYN-D2", [("montelukast", "MON17384"), ("losartan", "NOTRECALLED1")], email="", phone="")
    client.force_login(user("ph", group=PHARMACIST))
    response = client.post(URL, {"patient": holder.public_id, "question": "Are my montelukast and losartan safe?"},
                           HTTP_HX_REQUEST="true")
    html = response.content.decode()
    decisions = {d.subject: d for d in Decision.objects.filter(patient_id=holder.pk)}
    assert set(decisions) == {"montelukast", "losartan"}
    assert (decisions["montelukast"].verdict, decisions["losartan"].verdict) == ("stop", "safe")
    assert html.count('class="answer-card"') == 2
    for decision in decisions.values():
        assert str(decision.public_id) in html
