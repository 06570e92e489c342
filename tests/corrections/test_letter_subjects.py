"""An email's subject says no more than its letter: "recalled" only when the letter says the pack is
recalled, "may affect" when a recall may affect it, neither when no recall covers it; in every language."""

import pytest

from corrections.drafting import letter_subject, subject_kind
from drugs.matching import MatchClass
from tests.factories import make_patient

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("verdict", "match_class", "kind"), [
    ("stop", MatchClass.CONFIRMED, "recalled"), ("caution", MatchClass.PRODUCT_ALL_LOTS, "recalled"),
    ("stop", MatchClass.PROBABLE, "may"), ("caution", MatchClass.CANDIDATE, "may"), ("caution", "", "may"),
    ("unknown", "", "may"), ("unknown", MatchClass.CANDIDATE, "may"),
    ("safe", "", ""), ("safe", MatchClass.CONFIRMED, ""),  # a pack corrected to an unaffected lot
])
def test_the_subject_follows_the_verdict_and_how_sure_the_match_is(verdict, match_class, kind):
    assert subject_kind(recall_number="D-0326-2019", verdict=verdict, match_class=str(match_class)) == kind
    assert subject_kind(recall_number="", verdict=verdict, match_class=str(match_class)) == ""


def test_each_subject_is_translated_and_only_the_sure_one_says_recalled():
    english, spanish = make_patient("SYN-SUBJ-EN"), make_patient("SYN-SUBJ-ES")
    spanish.preferred_language = "es"
    subjects = {kind: (letter_subject(english, kind=kind), letter_subject(spanish, kind=kind))
                for kind in ("recalled", "may", "")}
    assert len({en for en, _es in subjects.values()}) == len({es for _en, es in subjects.values()}) == 3
    assert all(en != es for en, es in subjects.values())
    assert "recalled" in subjects["recalled"][0] and "retirado" in subjects["recalled"][1]
    assert "may affect" in subjects["may"][0] and "puede afectar" in subjects["may"][1]
    assert "recall" not in subjects[""][0] and "retir" not in subjects[""][1]
