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


@pytest.mark.parametrize(("reason", "words", "never"), [
    # Real reasons (2021 and 2023 bulk files) the first pattern in the old order misread.
    ("Microbial Contamination of Non-Sterile Products: Burkholderia cepacia complex", "contaminated", "sterile"),
    ("Microbial Contamination of Non Sterile Products", "contaminated", "sterile"),
    ("cMGP Deviations: Drug products repackaged into pouches without supporting stability studies.", "effective",
     "label"),
    ("Stability Data Does Not Support Expiry: potential loss of potency over the labeled shelf life", "effective",
     "label"),
    ("CGMP Deviations: Carcinogen impurity, N-Nitrosodimethylamine (NDMA), above the acceptable limit", "cancer",
     "quality standards"),
    ("Marketed without an Approved NDA/ANDA; FDA analysis found product to be tainted with undeclared sildenafil",
     "label does not list", "maker"),
    ("Lack of Assurance of Sterility", "not be sterile", "contaminated"),
    ("Labeling: Label Mix-up", "label", "sterile"),
])
def test_the_plain_reason_is_the_hazard_the_reason_names(reason, words, never):
    plain = drafting.plain_reason(reason)
    assert words in plain and never not in plain, plain


def test_no_real_reason_is_said_to_be_found_by_the_maker():
    """The reason says who found the problem (often the FDA); the plain words never claim it was the maker."""
    from tests.factories import SNAPSHOT_2021, read_results

    plains = {drafting.plain_reason(raw.get("reason_for_recall") or "") for raw in read_results(SNAPSHOT_2021)}
    assert not [p for p in plains if "maker" in p]
    # "Microbial contamination of non-sterile products": contamination of products never meant to be sterile.
    kind = re.compile(r"contamination of non-?\s?sterile products", re.I)
    contaminated = [raw["reason_for_recall"] for raw in read_results(SNAPSHOT_2021)
                    if kind.search(raw.get("reason_for_recall") or "")]
    assert len(contaminated) > 100
    plains = {drafting.plain_reason(r) for r in contaminated}
    assert "it may be contaminated" in plains and not [p for p in plains if "sterile" in p]
    assert "not be sterile" in drafting.plain_reason("Non-Sterility: the product was found to be non-sterile")


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
