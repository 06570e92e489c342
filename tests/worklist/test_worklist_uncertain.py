"""An uncertain lot parse is shown to the pharmacist on the recall page, beside the raw text.

D-577-2013 is a real record of the 2021 openFDA bulk file whose lot list the parser could not read
with certainty (recalls.lots flags it, and the lot is not matched automatically)."""


import pytest

from recalls.services import ingest_document
from tests.factories import SNAPSHOT_2021, openfda_record

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_recall_page_shows_what_the_lot_parser_was_unsure_of(client, people, hashing_embeddings):
    ingest_document({"results": [openfda_record("D-577-2013", SNAPSHOT_2021)]})

    client.force_login(people["pharmacist"])
    page = client.get("/worklist/recall/D-577-2013").content.decode()

    assert 'id="uncertain-scope"' in page and "10107747" in page
    assert "The recall&#x27;s own text" in page or "The recall's own text" in page


def test_a_recall_read_with_certainty_shows_no_such_panel(client, people, hashing_embeddings):
    from memory.fact_writes import assert_claim
    from tests.factories import recall_claim

    assert_claim(recall_claim("D-0315-2019", "3061169"))
    client.force_login(people["pharmacist"])
    page = client.get("/worklist/recall/D-0315-2019")
    assert page.status_code == 200 and 'id="uncertain-scope"' not in page.content.decode()
