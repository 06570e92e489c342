"""The /check page and GET /api/v1/check: the same answer, no login or key, what was typed kept in the form
when it cannot be read, nothing typed stored or logged, a limit per address shared by every worker (counted
in the database), English or Spanish as the reply pages choose. Real recall records (tests/factories.py)."""

import pytest
from django.db import connection

from ask.pack_check_counts import ADDRESS_SCOPE, outcome_counts
from tests.check.packs import (
    EVERY_LOT_PRINTED,
    EVERY_LOT_RECALL,
    VALSARTAN_LOT,
    VALSARTAN_NDC,
    VALSARTAN_RECALL,
    gs1_texts,
)
from tests.reliability.test_no_phi_in_logs import configured_log_output

pytestmark = pytest.mark.django_db(transaction=True)


def page(client, **form):
    return client.post("/check", form)


def test_the_form_works_without_javascript_and_every_field_is_labelled(client):
    html = client.get("/check").content.decode()
    assert '<form method="post" action="/check"' in html
    for name in ("ndc", "lot", "gs1"):
        assert f'<label for="id_{name}">' in html and f'name="{name}"' in html
    # The barcode reader is offered only once its script runs (the section is hidden without it).
    assert '<div id="scanner" hidden' in html and 'capture="environment"' in html


def test_a_recalled_lot_is_answered_with_the_recall_its_class_and_what_to_do(client, recalls):
    response = page(client, ndc=VALSARTAN_NDC, lot=f"LOT {VALSARTAN_LOT} EXP 11/2018")
    html = response.content.decode()
    assert response.status_code == 200
    assert "This pack is recalled." in html and VALSARTAN_RECALL in html and "Class II" in html
    assert "NDEA" in html and "What to do:" in html
    assert "safe" not in html.lower().replace("we checked the fda recalls", "")


def test_a_scanned_pack_is_answered_from_the_barcode_text(client, recalls):
    html = page(client, gs1=gs1_texts(EVERY_LOT_PRINTED, "ZZ1")[0]).content.decode()
    assert "This pack is recalled." in html and EVERY_LOT_RECALL in html and "Class I" in html


def test_malformed_input_gets_its_message_and_the_form_keeps_what_was_typed(client, recalls):
    response = page(client, ndc="0378-58O7-93", lot="3061169 exp 11/18")
    html = response.content.decode()
    assert response.status_code == 400
    assert "is not an NDC" in html and 'aria-invalid="true"' in html
    assert 'value="0378-58O7-93"' in html and 'value="3061169 exp 11/18"' in html


def test_the_page_is_in_spanish_when_the_browser_or_the_switch_asks(client, recalls):
    html = client.post("/check", {"ndc": VALSARTAN_NDC, "lot": "3095511"},
                       headers={"Accept-Language": "es"}).content.decode()
    assert 'lang="es"' in html and "Este lote no está en ningún retiro de la FDA" in html
    assert "This lot is not" not in html
    switched = client.get("/check?lang=es").content.decode()
    assert "Comprobar mi envase" in switched and 'name="lang" value="es"' in switched
    # The recall's status in the reader's words; what it covers said once.
    assert "(Clase II, en curso)" in html and "Ongoing" not in html
    assert "todos los lotes (" not in html


def test_a_recall_of_every_lot_in_a_window_says_what_it_covers_once(client, recalls):
    html = page(client, gs1=gs1_texts(EVERY_LOT_PRINTED, "ZZ1")[0]).content.decode()
    assert html.count("every lot") - html.count("every lot with") <= 1
    assert "every lot (every lot" not in html


def test_a_window_recall_is_said_in_the_readers_language(client, recalls):
    """The window decides whether a pack is recalled: a Spanish reader reads it in Spanish, and the class too."""
    from memory.fact_writes import assert_claim
    from tests.factories import recall_claim

    assert_claim(recall_claim("D-0971-2018", None))  # Solco valsartan: every lot with an expiry on or after 7/13/2018
    html = client.post("/check?lang=es", {"ndc": "43547-0370-09", "lot": "ZZ1", "lang": "es"},
                       headers={"Accept-Language": "es"}).content.decode()
    assert 'lang="es"' in html and "(Clase II" in html and "Class II" not in html
    assert "todos los lotes con fecha de vencimiento a partir de 13 de julio de 2018" in html, html
    assert "every lot" not in html and "July" not in html
    assert '<span lang="en">every' not in html


def test_the_api_gives_the_same_answer_without_a_key(client, recalls):
    response = client.get(f"/api/v1/check?ndc={VALSARTAN_NDC}&lot=0{VALSARTAN_LOT}")
    assert response.status_code == 200
    body = response.json()
    assert body["outcome"] == "may_be_recalled" and body["ndc"] == "00378-5807-93"
    assert body["recalls"][0]["number"] == VALSARTAN_RECALL and body["recalls"][0]["match"] == "probable"
    assert "pharmacist" in body["what_to_do"]
    scanned = client.get("/api/v1/check", {"gs1": gs1_texts(VALSARTAN_NDC, VALSARTAN_LOT)[3]}).json()
    assert scanned["outcome"] == "recalled"
    spanish = client.get("/api/v1/check", {"ndc": "1234-5678-90"}, headers={"Accept-Language": "es"}).json()
    assert spanish["outcome"] == "unidentified" and spanish["headline"] == "No pudimos identificar este producto."


def test_the_api_refuses_what_it_cannot_read_as_a_problem_naming_the_field(client):
    response = client.get("/api/v1/check", {"ndc": VALSARTAN_NDC, "lot": "EXP 05/2026"})
    assert response.status_code == 422 and response["Content-Type"] == "application/problem+json"
    assert response.json()["errors"][0]["field"] == "lot"
    assert client.get("/api/v1/check", {"gs1": "x" * 2000}).status_code == 422


def test_checks_are_limited_per_address_across_the_page_and_the_api(client, recalls, settings):
    settings.UNSAY_CHECK_RATE_PER_MINUTE = 3
    api = f"/api/v1/check?ndc={VALSARTAN_NDC}"
    statuses = [page(client, ndc=VALSARTAN_NDC).status_code, client.get(api).status_code,
                page(client, ndc=VALSARTAN_NDC).status_code]
    assert statuses == [200, 200, 200]
    refused = client.get(f"/api/v1/check?ndc={VALSARTAN_NDC}")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert page(client, ndc=VALSARTAN_NDC).status_code == 429
    # Another address still gets its answer.
    assert client.post("/check", {"ndc": VALSARTAN_NDC}, REMOTE_ADDR="192.0.2.7").status_code == 200


def test_nothing_typed_and_no_address_is_stored_or_logged(client, recalls):
    odd_lot, address = "Q7Z9X4W", "198.51.100.23"
    with configured_log_output() as output:
        page(client, ndc=VALSARTAN_NDC, lot=odd_lot)
        client.get(f"/api/v1/check?ndc=0378-5807-93&lot={odd_lot}", REMOTE_ADDR=address)
        client.get("/api/v1/check?ndc=0378-5807-93&lot=EXP%2005/2026", REMOTE_ADDR=address)  # refused: logged as a 422
    logged = output.getvalue()
    assert "/api/v1/check" in logged  # the request lines are there ...
    for typed in (odd_lot, "5807", address):  # ... without what was typed or who asked
        assert typed not in logged
    assert outcome_counts() == {"not_listed": 2}
    with connection.cursor() as cursor:
        cursor.execute("SELECT scope FROM ask_usagecounter")
        scopes = [row[0] for row in cursor.fetchall()]
    assert all(odd_lot not in s and "5807" not in s and address not in s and "127.0.0.1" not in s for s in scopes)
    assert any(s.startswith(ADDRESS_SCOPE) for s in scopes)


def test_the_reply_pages_offer_to_check_another_pack(client):
    from django.template.loader import render_to_string

    for template in ("replies/thanks.html", "replies/reply.html"):
        html = render_to_string(template, {"pharmacy_name": "Demo", "pharmacy_phone": "+1 202 555 0143",
                                           "form": None, "answer": "returned"})
        assert 'href="/check?lang=en"' in html and "Check another pack" in html
