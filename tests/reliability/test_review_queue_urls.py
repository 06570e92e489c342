"""A recall number with "/" (or other URL syntax) already in the database must not break the review
queue for every pharmacist (NoReverseMatch on bulk_approve was a 500 surviving restarts)."""

import pytest

from corrections.models import Correction

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


@pytest.mark.parametrize("number", ["D-0326/2019", "D-0326-2019?x=1#y", "D 0326 % 2019"])
def test_the_queue_renders_and_bulk_approve_resolves_with_a_bad_existing_recall_number(client, people, drafts,
                                                                                        number):
    Correction.objects.update(recall_number=number)
    client.force_login(people["pharmacist"])
    response = client.get("/corrections/review/")
    assert response.status_code == 200
    from django.urls import reverse

    url = reverse("corrections:bulk_approve", args=[number])
    confirm = client.get(url)
    assert confirm.status_code == 200 and confirm.context["recall_number"] == number
    assert len(confirm.context["drafts"]) == Correction.objects.count()
