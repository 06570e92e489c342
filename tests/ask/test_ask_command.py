"""manage.py ask prints the verdict, the answer and the read set with versions and load-bearing marks."""

from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory.fact_writes import assert_claim
from tests.factories import make_patient, recall_claim

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_prints_verdict_answer_and_grounded_read_set(hashing_embeddings):
    assert_claim(recall_claim("D-0326-2019", "3069020"))
    assert_claim(recall_claim("D-0326-2019", "3069021"))
    make_patient("SYN-E1", [("valsartan", "3069020", "00378-5814-77")], name="Synthetic E", email="",
                 phone="", dispensed_at=datetime(2018, 10, 2, tzinfo=UTC))
    out = StringIO()
    call_command("ask", "Is my medicine safe?", patient="SYN-E1", subject="valsartan", stdout=out)
    text = out.getvalue()
    assert "verdict:  caution" in text and "D-0326-2019" in text
    assert "recall:D-0326-2019:lot:3069020 v1  LOAD-BEARING" in text
    assert "recall:D-0326-2019:lot:3069021 v1  shown" in text


def test_it_names_an_unknown_patient():
    with pytest.raises(CommandError, match="No patient with reference 'NOPE'"):
        call_command("ask", "safe?", patient="NOPE")
