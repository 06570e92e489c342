"""Is every sentence a patient reads true of the match it came from? One reusable check for answers (ask)
and letters (corrections and notices, email and SMS, English and Spanish).

    sentence_problems(text, *, verdict, found, fact, patient) -> list[str]     [] when nothing is untrue

- `text`: an answer or a letter as the patient would read it.
- `verdict`: the verdict it was written for ("safe", "caution", "stop", "unknown").
- `found`: drugs.matching.Found (explain(fact, row)) for the patient's dispensing row the recall reaches
  most surely, or None when it reaches none of them.
- `fact`: the recall fact (a memory Fact, or anything with its kind, subject, lot, statement and
  attributes) the text is checked against; None when there is none.
- `patient`: a patients.models.Patient (its dispensing rows and preferred language are read), or any
  object with `rows` (drugs.matching.Dispensed-like: drug, ndc/ndc_product, lot, lot_known, dispensed_at)
  and `preferred_language`.

What it checks, outside quotations (the FDA's own words and what we told the patient before are quoted
as written): no internal key; no "keep taking" about a Class I recall or with "stop"; "every lot/batch"
only for a recall of every lot, and no replacement "from an unaffected lot" then; "other makers" or
"another company" only when the recall names products and the patient holds one of another labeler; no
label packaging, count or labeler words in a product name; lot numbers quoted are the recall's or the
patient's; "no record" only when no row of theirs is the recalled product; "safe" never for a pack the
recall reaches, nor for a pack whose lot or product is unknown; a confirmed pack of a Class I recall is
"stop"; a candidate is never told its batch is recalled and a probable match is told it "may" be; a pack
outside a recall's window is told about the window, never about other makers; a patient whose medicine
the recall is not about does not hear of it; an unknown answer says what is unknown and what to do; a
letter to a Spanish reader has no English sentence of ours, its sign-off included.
"""

import re

from django.conf import settings

from drugs import recall_terms
from drugs.lots import canonical_lot
from drugs.matching import MatchClass, dispensing_product, lot_known, within_lot_scope

QUOTED = re.compile(r"“[^”]*”")
KEY = re.compile(r"\bproduct:|\brecall:D-|\bdrug:[a-z]|\bndc:\d")
KEEP_TAKING = re.compile(r"\bkeep taking\b|\bsiga tomando\b|\bsiga tomándolo\b", re.I)
STOP_TAKING = re.compile(r"\bstop (?:taking|using)\b", re.I)
EVERY_LOT = re.compile(r"\bevery (?:lot|batch)\b|\ball lots\b|\btodos los lotes\b", re.I)
UNAFFECTED = re.compile(r"\bunaffected lot\b", re.I)
OTHER_MAKER = re.compile(r"\bother makers\b|\banother company\b", re.I)
PACKAGING = re.compile(r"\b\d+\s*-?\s*count\b|\b(?:manufactured|distributed|marketed|repackaged|relabeled|packaged)"
                       r"\s+(?:by|for|in)\b|\brx\s+only\b|\bbottles?\b|\bblisters?\b|\bcartons?\b|"
                       r"\bNDC[:#\s]*\d{4,5}-\d{3,4}-\d{1,2}\b", re.I)
LOTS_QUOTED = re.compile(r"\b(?:lot|lots|lote|lotes)\s+((?:[A-Z0-9][A-Z0-9./@_-]*)(?:(?:,\s*|\s+and\s+|\s+y\s+)"
                         r"[A-Z0-9][A-Z0-9./@_-]*)*)")
SURE_WORDS = re.compile(r"\bis from a recalled lot\b|\bis a recalled product\b|\baffects the batch\b|"
                        r"\bincluding yours\b|\bcame from the recalled stock\b|\bafecta al lote\b|"
                        r"\bthe medicine (?:is being|was) recalled\b|\bel medicamento se (?:está retirando|retiró)\b|"
                        r"\bbring the pack back\b|\bdevuelva el envase\b", re.I)
NO_RECORD = re.compile(r"\bno record of\b", re.I)
UNKNOWN_WHAT = re.compile(r"lot number|product code|which product|could not find|no record", re.I)
# Sentences of ours in English, any of which in a letter to a Spanish reader is English left in it.
ENGLISH = re.compile(r"\bThe pharmacists at\b|\bDear\b|\bPhone\b|\bIf you have any questions\b|\bPlease call\b|"
                     r"\bWhat to do\b|\bYour pack\b|\bKeep taking\b|\bcall us\b|\bwe gave you\b", re.I)


def _rows(patient) -> list:
    rows = getattr(patient, "rows", None)
    if rows is not None:
        return list(rows)
    return [row.as_dispensed() for row in patient.dispensings.all()] if patient is not None else []


def _closed_before_all(fact, rows) -> bool:
    """A closed drug-level recall and every pack dispensed after the day it closed (not in it)."""
    closed_on = (fact.attributes or {}).get("termination_date")
    if recall_terms.is_active(fact) or not closed_on or not recall_terms.is_drug_level(fact) or not rows:
        return False
    days = [getattr(r, "dispensed_at", None) for r in rows]
    return all(d is not None and str(d)[:10] > closed_on for d in days)


def _about_their_medicine(fact, rows) -> bool:
    products = recall_terms.products(fact)
    return any(r.drug == fact.subject or (dispensing_product(r) and dispensing_product(r) in products) for r in rows)


def _lots_allowed(fact, rows) -> set[str]:
    lots = {getattr(fact, "lot", None) or ""} | {r.lot for r in rows}
    lots |= {entry.get("lot", "") for entry in (recall_terms.lot_scope(fact) or {}).get("lots") or []
             if isinstance(entry, dict)}
    return {canonical_lot(lot) for lot in lots if lot}


def sentence_problems(text: str, *, verdict: str, found, fact, patient) -> list[str]:
    """Every untrue sentence of `text` about `fact` and this patient's dispensing (module docstring)."""
    problems = []
    ours = QUOTED.sub("“”", text or "")
    rows = _rows(patient)
    klass = found.klass if found is not None else None
    recall = fact is not None and recall_terms.is_recall(fact) and getattr(fact, "retracted_at", None) is None
    number = recall_terms.recall_number(fact) if recall else ""
    class_one = recall and recall_terms.classification(fact) == "Class I"
    reaches = klass is not None and not (recall and _closed_before_all(fact, rows))

    if KEY.search(ours):
        problems.append("shows an internal key")
    if STOP_TAKING.search(ours):
        problems.append("tells the patient to stop taking it")
    if KEEP_TAKING.search(ours) and (verdict == "stop" or (class_one and verdict != "safe")):
        problems.append("says keep taking about a Class I recall" if class_one else "says keep taking with stop")
    if recall and EVERY_LOT.search(ours) and not recall_terms.is_drug_level(fact):
        problems.append("says every lot of a recall of some lots")
    if recall and UNAFFECTED.search(ours) and recall_terms.every_lot_recalled(fact) and reaches:
        problems.append("offers a pack from an unaffected lot when every lot is recalled")
    if OTHER_MAKER.search(ours):
        theirs = {p[:5] for p in recall_terms.products(fact)} if recall else set()
        mine = {dispensing_product(r)[:5] for r in rows} - {""}
        if not theirs or not mine or mine & theirs:
            problems.append("says other makers without a product of another labeler")
    if PACKAGING.search(ours):
        problems.append(f"label packaging or labeler words: {PACKAGING.search(ours).group(0)!r}")
    allowed = _lots_allowed(fact, rows) if recall else {canonical_lot(r.lot) for r in rows if r.lot}
    for group in LOTS_QUOTED.findall(ours):
        for lot in re.split(r",\s*|\s+and\s+|\s+y\s+", group):
            if re.search(r"\d", lot) and canonical_lot(lot) not in allowed and not lot.startswith("0000"):
                problems.append(f"quotes lot {lot}, neither the recall's nor the patient's")
    if NO_RECORD.search(ours) and rows and (reaches or re.search(r"no record of any medicine", ours, re.I)):
        problems.append("says no record though a row of theirs is the recalled product")
    if verdict == "safe":
        if reaches:
            problems.append(f"safe, though the recall reaches the pack ({klass})")
        relevant = [r for r in rows if recall and _about_their_medicine(fact, [r])] or rows
        if any(not lot_known(r) for r in relevant):
            problems.append("safe, though the lot of the pack is not known")
    if reaches and class_one and klass in (MatchClass.CONFIRMED, MatchClass.PRODUCT_ALL_LOTS) and verdict != "stop" \
            and (klass == MatchClass.CONFIRMED or recall_terms.every_lot_recalled(fact)):
        problems.append(f"a confirmed pack of a Class I recall is {verdict}, not stop")
    if klass == MatchClass.CANDIDATE and SURE_WORDS.search(ours):
        problems.append(f"a candidate is told it is recalled: {SURE_WORDS.search(ours).group(0)!r}")
    if klass == MatchClass.PROBABLE and reaches and SURE_WORDS.search(ours):
        problems.append(f"a probable match is told as certain: {SURE_WORDS.search(ours).group(0)!r}")
    if recall and klass is None and number and number in ours:
        if rows and recall_terms.window_kind(fact) and not any(within_lot_scope(fact, r) for r in rows):
            if not re.search(r"window|expiry|vencimiento|dispensed before", ours, re.I):
                problems.append("outside the recall's window, but not told so")
            if OTHER_MAKER.search(ours):
                problems.append("outside the recall's window, told it is other makers")
        if rows and not _about_their_medicine(fact, rows):
            problems.append("names a recall that is not about their medicine")
    if re.search(r"\bOne of these is\b", ours) and len(set(re.findall(r"\b[DFV]-\d{2,4}-\d{4}\b", ours))) < 2:
        problems.append("says 'one of these' of a single recall")
    if re.search(r"No action needed[^.]*\.\s*No action needed", ours):
        problems.append("says 'No action needed' twice")
    letter = settings.UNSAY_PHARMACY_NAME in (text or "")  # letters are signed; answers are not
    if verdict == "unknown" and not letter and \
            not (UNKNOWN_WHAT.search(ours) and re.search(r"pharmacist|pharmacy|call us", ours, re.I)):
        problems.append("unknown, without saying what is unknown and what to do")
    if (getattr(patient, "preferred_language", "") or "en") == "es" and letter:
        left = ENGLISH.search(ours)
        if left:
            problems.append(f"English in a Spanish letter: {left.group(0)!r}")
    return problems
