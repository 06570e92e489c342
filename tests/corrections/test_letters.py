"""Letters for every verdict x channel x match class: no placeholder left, no FDA jargon outside
the quoted FDA reason (and then with its plain explanation), SMS within the hard limit, the
headline and the instruction never contradict each other, pharmacy details from settings."""

import re
from types import SimpleNamespace

import pytest

from corrections import drafting

VERDICTS = ["safe", "caution", "stop", "unknown"]
CHANNELS = ["email", "sms"]
# Correction.match values the sweep writes, and drugs.matching's classes a notice may carry.
MATCHES = ["asked", "lot", "drug"]
REASONS = [
    "CGMP Deviations: Presence of N-Nitrosodiethylamine (NDEA) impurity",
    "Subpotent drug",
    "Lack of Assurance of Sterility",
    "Failed Dissolution Specifications",
    "Labeling: Label Mixup",
    "Something the glossary has never seen",
]
LONG_DRUG = "amlodipine+hydrochlorothiazide+olmesartan medoxomil+valsartan"


def _fact(reason, classification="Class I", subject="valsartan", lot="3061169"):
    return SimpleNamespace(subject=subject, lot=lot, retracted_at=None, fact_key="recall:D-0315-2019:lot:3061169",
                           attributes={"classification": classification, "reason": reason, "status": "Ongoing",
                                       "recall_number": "D-0315-2019", "firm": "Mylan"})


def _letter(verdict, channel, match, reason, subject="valsartan"):
    patient = SimpleNamespace(display_name="Synthetic Patient", preferred_channel=channel)
    fact = _fact(reason, subject=subject, lot=None if match == "drug" else "3061169")
    outcome = SimpleNamespace(verdict=verdict, subject=subject, answer="")
    if match == "asked":
        previous = _fact(reason, classification="Class II", subject=subject)
        return drafting.correction_text(patient, "caution", outcome, fact, previous)
    return drafting.notice_text(patient, match, outcome, fact)


def _outside_quote(text):
    return re.sub(r"“[^”]*”", "", text)


CASES = [(v, c, m, r) for v in VERDICTS for c in CHANNELS for m in MATCHES for r in REASONS]


@pytest.mark.parametrize("verdict,channel,match,reason", CASES)
def test_every_letter_is_complete_plain_and_consistent(settings, verdict, channel, match, reason):
    settings.UNSAY_PHARMACY_NAME = "Elm Road Pharmacy"
    settings.UNSAY_PHARMACY_PHONE = "+1 202 555 0143"
    text = _letter(verdict, channel, match, reason)
    # No template syntax, no unfilled value, no Python repr leaking.
    for leftover in ("{{", "}}", "{%", "%}", "None", "%(", "[", "]"):
        assert leftover not in text, (leftover, text)
    # Jargon only inside the FDA's quoted words, and then the plain explanation is there too.
    plain = _outside_quote(text)
    for term in drafting.JARGON:
        assert not re.search(rf"\b{re.escape(term)}\b", plain), (term, text)
    assert "Elm Road Pharmacy" in text and "+1 202 555 0143" in text
    headline = drafting.verdict_headline(verdict)
    assert headline in text
    # One instruction per verdict, never contradicting the headline: no "stop taking" anywhere.
    assert not re.search(r"\bstop (taking|using)\b", text, re.I)
    if verdict == "safe":
        assert "free of charge" not in text and "replacement is free" not in text
    else:
        assert "free" in text  # what happens to the pack: replacement is free
    if channel == "sms":
        assert len(text) <= settings.UNSAY_SMS_LIMIT
    else:
        assert text.startswith("Dear Synthetic Patient,")
        assert drafting.verdict_instruction(verdict, "valsartan", "+1 202 555 0143") in text
        assert drafting.pack_instruction(verdict) in text
        if verdict != "safe":  # a safe letter does not explain a recall that does not cover the pack
            assert f"“{reason}”" in text  # the FDA reason as a quoted detail
            assert drafting.plain_reason(reason) in text


@pytest.mark.parametrize("verdict", VERDICTS)
def test_an_sms_for_a_long_drug_name_still_fits(settings, verdict):
    settings.UNSAY_SMS_LIMIT = 160
    text = _letter(verdict, "sms", "lot", REASONS[0], subject=LONG_DRUG)
    assert len(text) <= 160 and "{" not in text


def test_the_glossary_explains_the_jargon_it_knows():
    assert "impurity" in drafting.plain_reason("CGMP Deviations: NDEA above the interim limit")
    assert "quality standards" in drafting.plain_reason("CGMP Deviations")
    assert "less medicine" in drafting.plain_reason("Subpotent Drug")


def test_identity_keys_read_as_words():
    assert drafting.drug_words("amlodipine+valsartan") == "amlodipine and valsartan"
    assert drafting.drug_words("a+b+c") == "a, b and c"


def test_the_html_part_is_the_reviewed_text():
    html = drafting.letter_html("Dear A,\n\nCall us <now>.")
    assert "<p>Dear A,</p>" in html and "Call us &lt;now&gt;." in html


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_letter_whose_answer_rests_on_a_class_one_recall_never_says_keep_taking(settings, channel):
    """A correction about a Class II change whose new answer (caution) also rests on a Class I candidate:
    the answer's load-bearing recalls decide whether a Class I recall is involved, not the letter's own."""
    settings.UNSAY_PHARMACY_PHONE = "+1 202 555 0143"
    patient = SimpleNamespace(display_name="Synthetic Patient", preferred_channel=channel)
    changed, previous = _fact("Subpotent drug", "Class II"), _fact("Subpotent drug", "Class III")
    class_one = SimpleNamespace(**{**vars(_fact("Lack of Assurance of Sterility", "Class I", lot=None)), "id": 7,
                                   "kind": "recall"})
    resting = SimpleNamespace(verdict="caution", subject="valsartan", answer="", load_bearing_ids={7},
                              retrieved=[SimpleNamespace(fact=class_one)])
    alone = SimpleNamespace(verdict="caution", subject="valsartan", answer="", load_bearing_ids=set(),
                            retrieved=[SimpleNamespace(fact=class_one)])  # read, not leaned on
    assert not re.search(r"(?i)keep taking", drafting.correction_text(patient, "safe", resting, changed, previous))
    assert re.search(r"(?i)keep taking", drafting.correction_text(patient, "safe", alone, changed, previous))
