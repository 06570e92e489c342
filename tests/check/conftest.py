import pytest

from memory.fact_writes import assert_claim
from tests.check.packs import EVERY_LOT_RECALL, VALSARTAN_LOT, VALSARTAN_RECALL
from tests.factories import recall_claim


@pytest.fixture
def recalls(hashing_embeddings):
    """The two real recalls of tests/check/packs.py as believed facts: one lot of D-0315-2019, every lot of
    D-0219-2017."""
    assert_claim(recall_claim(VALSARTAN_RECALL, VALSARTAN_LOT))
    assert_claim(recall_claim(EVERY_LOT_RECALL, None))
