"""Every letter the sweep can write, read for contradictions: each (verdict the patient was told -> new
verdict) pair, under each kind of change that can cause it, for each match class and channel.

The facts carry the attributes ingestion builds from a real record (D-0315-2019, Mylan valsartan lot
3061169, Class II, Ongoing) with its class and status changed the way later versions change them;
the patient is synthetic. Rendering is pure (no database), so the whole matrix is one test that
reports every contradiction it finds at once."""

import re
from types import SimpleNamespace

import pytest

from corrections import drafting
from memory.models import Fact
from recalls.models import TEXTS_REFERENCE
from tests.factories import recall_claim

VERDICTS = ["safe", "caution", "stop", "unknown"]
CLASSES = ["confirmed", "probable", "candidate", ""]
CHANNELS = ["email", "sms"]
SAFE_WORDS = re.compile(r"\bkeep using\b|No action needed|do not need to do anything", re.I)
RECALLED_WORDS = re.compile(r"\b(?:is|are) being recalled\b|\bwas recalled\b|\bwere recalled\b|free of charge|"
                            r"replacement is free", re.I)
YOUR_BATCH = re.compile(r"the batch \(lot|recalled lot|covers the batch|affects the", re.I)


@pytest.fixture(scope="module")
def real():
    claim = recall_claim("D-0315-2019", "3061169")
    # The record's texts inline (as facts written before RecallText read), not by reference: rendering
    # then needs no database and no text cache filled by an earlier test.
    attributes = {k: v for k, v in claim.attributes.items() if k != TEXTS_REFERENCE} | claim.texts
    return {"subject": claim.subject, "lot": claim.lot, "attributes": attributes}


def _fact(real, *, id, classification="Class II", status="Ongoing", retracted=False, kind=Fact.Kind.RECALL,
          lot="same", **more):
    attributes = dict(real["attributes"], classification=classification, status=status, **more)
    return SimpleNamespace(id=id, pk=id, subject=real["subject"], lot=real["lot"] if lot == "same" else lot,
                           kind=kind, retracted_at="2026-01-01" if retracted else None, attributes=attributes,
                           fact_key=f"recall:D-0315-2019:lot:{real['lot']}")


def _changes(real):
    """(name, previous, fact, dispensing_changed) as the sweep passes them to correction_text."""
    c2, c1 = _fact(real, id=1), _fact(real, id=2, classification="Class I")
    c1_closed = _fact(real, id=3, classification="Class I", status="Terminated")
    c2_closed = _fact(real, id=4, status="Terminated")
    withdrawn = _fact(real, id=5, retracted=True)
    label = _fact(real, id=6, kind=Fact.Kind.LABEL, lot=None, reason="Boxed warning: fetal toxicity")
    return [
        ("new recall", None, c2, False),
        ("new recall, already closed", None, c2_closed, False),
        ("raised", c2, c1, False),
        ("lowered", c1, c2, False),
        ("closed", c1, c1_closed, False),
        ("raised and closed", c2, c1_closed, False),
        ("reopened", c1_closed, c1, False),
        ("withdrawn", withdrawn, withdrawn, False),
        ("label warning", None, label, False),
        ("dispensing corrected", None, c1, True),
        ("other detail", c1, _fact(real, id=7, classification="Class I", distribution_pattern="Nationwide (updated)"),
         False),
    ]


def _problems(letter, *, verdict, change, fact, certainty, kind, channel):
    found = []
    text = re.sub(r"“[^”]*”", "“”", letter)  # what we said before and the FDA's words are quotations
    closed = (fact.attributes or {}).get("status") in drafting.CLOSED and fact.retracted_at is None
    for leftover in ("{{", "}}", "{%", "%}", "None", "%(", "[", "]"):
        if leftover in letter:
            found.append(f"left over {leftover!r}")
    if re.search(r"[^\n ]  +[^\n ]", text):
        found.append("a blank where a word should be")
    if re.search(r"raised to a recall\b", text) or ("raised" in text and "raised" not in change):
        found.append("says raised though the class did not go up")
    if "lowered" in text and change != "lowered":
        found.append("says lowered")
    if verdict == "safe" and RECALLED_WORDS.search(text):
        found.append("safe, yet speaks of the pack as recalled")
    if verdict != "safe" and SAFE_WORDS.search(text):
        found.append("not safe, yet tells the patient to keep using it / no action")
    if certainty == "candidate" and YOUR_BATCH.search(text):
        found.append("a candidate is told the recall covers their batch")
    if certainty == "probable" and kind == "notice" and channel == "email" and not re.search(
            r"may affect|may be from", text):
        found.append("a probable match is told as certain")
    if closed and verdict != "safe" and re.search(r"\b(?:is|are) being recalled\b", text):
        found.append("a closed recall is described as ongoing")
    if not closed and kind == "correction" and "closed" in text and "closed" not in change:
        found.append("an open recall is described as closed")
    if change == "dispensing corrected" and re.search(r"the recall (?:has|no longer)", text):
        found.append("a change to our record is described as a change to the recall")
    if kind == "correction" and channel == "email" and change == "dispensing corrected" and "record" not in text:
        found.append("a change to our record is not named")
    if re.search(r"\bstop (taking|using)\b", text, re.I):
        found.append("tells the patient to stop taking it")
    return found


def test_no_letter_contradicts_itself_for_any_change_verdict_pair_match_or_channel(settings, real):
    settings.UNSAY_PHARMACY_NAME = "Elm Road Pharmacy"
    settings.UNSAY_PHARMACY_PHONE = "+1 202 555 0143"
    problems, rendered = [], 0
    for channel in CHANNELS:
        patient = SimpleNamespace(display_name="Synthetic Patient", preferred_channel=channel)
        for certainty in CLASSES:
            for change, previous, fact, dispensing in _changes(real):
                for old in VERDICTS:
                    for new in VERDICTS:
                        if old == new:
                            continue
                        outcome = SimpleNamespace(verdict=new, subject=real["subject"], answer="")
                        text = drafting.correction_text(patient, old, outcome, fact, previous,
                                                        match_class=certainty, dispensing_changed=dispensing)
                        rendered += 1
                        problems += [(channel, certainty, change, f"{old}->{new}", p, text) for p in _problems(
                            text, verdict=new, change=change, fact=fact, certainty=certainty, kind="correction",
                            channel=channel)]
            # Notices: a patient who never asked, about a recall now believed (never a bare retraction).
            for change, _previous, fact, _dispensing in _changes(real):
                if fact.retracted_at is not None or fact.kind != Fact.Kind.RECALL:
                    continue
                for match in ("lot", "drug"):
                    for new in ("caution", "stop"):
                        outcome = SimpleNamespace(verdict=new, subject=real["subject"], answer="")
                        text = drafting.notice_text(patient, match, outcome, fact, match_class=certainty)
                        rendered += 1
                        problems += [(channel, certainty, change, f"notice/{match}->{new}", p, text)
                                     for p in _problems(text, verdict=new, change=change, fact=fact,
                                                        certainty=certainty, kind="notice", channel=channel)]
    assert rendered > 700
    summary = sorted({p for *_, p, _t in problems})
    assert not problems, f"{len(problems)} contradictions ({summary}), first ones:\n" + "\n\n".join(
        f"{c} | {k or 'unclassified'} | {ch} | {pair}: {p}\n{t}" for c, k, ch, pair, p, t in problems[:4])


def test_a_candidate_notice_says_what_is_not_known_and_a_confirmed_one_names_the_lot(real):
    patient = SimpleNamespace(display_name="Synthetic Patient", preferred_channel="email")
    fact = _fact(real, id=1)
    outcome = SimpleNamespace(verdict="caution", subject=real["subject"], answer="")
    candidate = drafting.notice_text(patient, "drug", outcome, fact, match_class="candidate")
    confirmed = drafting.notice_text(patient, "lot", outcome, fact, match_class="confirmed")
    assert "do not show whether your pack is from one of them" in candidate and real["lot"] not in candidate
    assert f"affects the batch (lot {real['lot']})" in confirmed


def test_a_closed_recall_letter_says_closed_and_still_not_safe(real):
    patient = SimpleNamespace(display_name="Synthetic Patient", preferred_channel="email")
    closed = _fact(real, id=3, classification="Class I", status="Terminated")
    outcome = SimpleNamespace(verdict="stop", subject=real["subject"], answer="")
    text = drafting.correction_text(patient, "caution", outcome, closed, _fact(real, id=1))
    assert "raised to the most serious kind of recall" in text and "closed the recall" in text
    assert "does not make a recalled pack safe" in text
