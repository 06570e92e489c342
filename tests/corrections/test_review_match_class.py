"""Review cards say how sure the match is (drugs.matching's class), so a name-only candidate is
visibly not a confirmed exposure (real sweep drafts of the real D-0315-2019 recall; patients synthetic)."""

import re

import pytest

from corrections.models import Correction

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


def _card(page: str, correction) -> str:
    match = re.search(rf'<article[^>]*id="card-{correction.public_id}".*?</article>', page, re.S)
    assert match, "card not on the page"
    return match.group(0)


def test_cards_show_the_match_class_and_warn_on_a_candidate(client, people, drafts):
    a, b, d = drafts["SYN-A"], drafts["SYN-B"], drafts["SYN-D"]
    Correction.objects.filter(pk=a.pk).update(match_class="confirmed")
    Correction.objects.filter(pk=b.pk).update(match_class="candidate")
    Correction.objects.filter(pk=d.pk).update(match_class="", match="drug")  # drafted before classes: legacy
    client.force_login(people["pharmacist"])
    page = client.get("/corrections/review/").content.decode()
    confirmed, candidate, legacy = _card(page, a), _card(page, b), _card(page, d)
    assert 'data-match-class="confirmed"' in confirmed and "Confirmed (NDC product and lot)" in confirmed
    assert "not a confirmed exposure" not in confirmed
    assert 'data-match-class="candidate"' in candidate and "not a confirmed exposure" in candidate
    assert 'data-match-class="candidate"' in legacy and "not a confirmed exposure" in legacy
