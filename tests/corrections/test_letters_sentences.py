"""Every sentence a patient reads is true of the match it came from: every answer (ask) and every letter
(correction and notice, email and SMS, English and Spanish) over a corpus of REAL openFDA recalls, for
synthetic patients in each relation to the recall, checked by tests/sentences.py.

The corpus (RECALLS): lot-level recalls, recalls of every lot, of every lot in an expiry or dispensing
window, Class I, II and III, ongoing and terminated, products the vocabulary names and products it does
not (a `product:` identity), each as ingestion turns it into facts. Each recall is alone in the fact
store while its patients are decided, so a sentence is checked against the one recall it can be about.
The patients (RELATIONS, synthetic): the recalled product and lot (confirmed), the recalled lot with no
NDC on record (probable), a near-miss lot, the lot not recorded (candidate), a pack outside the recall's
window, another lot or another labeler's product of the same medicine (decoys), and another medicine
whose lot happens to share the recalled lot's number (a decoy the recall's lot scope reaches).
"""

from collections import Counter
from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.db import connection

from ask.services import decide
from corrections import drafting
from drugs import recall_terms
from drugs.identity import resolve
from drugs.matching import explain
from memory.fact_writes import assert_claims
from memory.models import Fact
from patients.models import DispensingRecord
from recalls.selectors import recall_attributes
from tests.factories import make_patient, recall_claims_of
from tests.sentences import sentence_problems

pytestmark = [pytest.mark.django_db(transaction=True)]

RECALLS = [
    # The recalls testers and the sweep's world use (lot-level Class I, II, III; terminated; windows).
    "D-0315-2019",  # Class II, Mylan valsartan 40 mg, one lot, ongoing
    "D-0326-2019",  # Class II, Mylan valsartan 160 mg, three lots
    "D-0502-2019",  # Class II, losartan printed in capitals, lot 4L67C035
    "D-0081-2019",  # Class I, montelukast label mix-up, lot MON17384
    "D-0471-2017",  # Class III, aripiprazole
    "D-1047-2019",  # Class II, valsartan in unit-dose blisters, terminated
    "D-0101-2019",  # Class II, metformin extended release, two lots, terminated
    "D-528-2014",  # Class II, metformin in tall-man letters ("metFORMIN"), pedigree lot
    "D-0735-2020",  # Class II, compounded HCG: a product the vocabulary cannot name
    "D-0219-2017",  # Class I, docusate, every lot, named NDC, terminated
    "D-0434-2015",  # Class I, sodium chloride bags, every lot ("no unique lot number")
    "D-0419-2019",  # Class II, promethazine gel, code_info "N/A": every lot treated as affected
    "D-580-2013",  # Class III, lorazepam: a lot number the parser could not read, so every lot
    "D-1113-2018",  # Class II, valsartan, every lot expiring 7/2018 to 6/2020
    "D-0971-2018",  # Class II, Solco valsartan, every lot within expiry (a window with a start only)
    "D-0345-2018",  # Class I, Limbrel (a product text), every lot within expiry, terminated
    "D-0587-2020",  # Class II, compounded fentanyl/bupivacaine/morphine, a dispensing window, terminated
    "D-0863-2017",  # Class I, homeopathic teething tablets, every lot within expiry
    # Identity keys the vocabulary reads as another key when re-resolved ("ephedrine+sodium chloride" as
    # pseudoephedrine): a patient asked about the row they hold must hear about that row.
    "D-1336-2016",  # Class II, compounded ephedrine in sodium chloride, every lot within expiry
    "D-470-2014",  # Class II, calcium citrate, lot-level
    "D-583-2014",  # Class II, vitamin E (d alpha tocopherol), lot-level
    # The first record (by number, of at most 20 lots) of each kind in the 2021 snapshot: class, scope,
    # whether it lists NDCs, whether the vocabulary names it.
    "D-0103-2018",  # Class I, all_lots, no NDC, ingredients, Terminated
    "D-0019-2017",  # Class I, all_lots, no NDC, product text, Terminated
    "D-040-2013",  # Class I, all_lots, NDC, product text, Terminated
    "D-0500-2019",  # Class I, all_lots_window, no NDC, ingredients, Ongoing
    "D-0121-2018",  # Class I, all_lots_window, no NDC, product text, Terminated
    "D-0098-2021",  # Class I, all_lots_window, NDC, ingredients, Ongoing
    "D-0344-2018",  # Class I, all_lots_window, NDC, product text, Terminated
    "D-0003-2019",  # Class I, lots, no NDC, ingredients, Terminated
    "D-0004-2019",  # Class I, lots, no NDC, product text, Ongoing
    "D-0002-2015",  # Class I, lots, NDC, ingredients, Terminated
    "D-0094-2017",  # Class I, lots, NDC, product text, Terminated
    "D-1531-2014",  # Class II, all_lots, no NDC, no name at all, Terminated
    "D-0013-2019",  # Class II, all_lots, no NDC, ingredients, Ongoing
    "D-0012-2015",  # Class II, all_lots, no NDC, product text, Terminated
    "D-0006-2019",  # Class II, all_lots, NDC, ingredients, Ongoing
    "D-0229-2021",  # Class II, all_lots, NDC, product text, Ongoing
    "D-0004-2018",  # Class II, all_lots_window, no NDC, ingredients, Terminated
    "D-0003-2015",  # Class II, all_lots_window, no NDC, product text, Terminated
    "D-0010-2017",  # Class II, all_lots_window, NDC, ingredients, Terminated
    "D-0105-2019",  # Class II, all_lots_window, NDC, product text, Terminated
    "D-0002-2017",  # Class II, lots, no NDC, ingredients, Terminated
    "D-0003-2017",  # Class II, lots, no NDC, product text, Terminated
    "D-0001-2019",  # Class II, lots, NDC, ingredients, Terminated
    "D-0002-2019",  # Class II, lots, NDC, product text, Terminated
    "D-1452-2014",  # Class III, all_lots, no NDC, ingredients, Terminated
    "D-0553-2018",  # Class III, all_lots, no NDC, product text, Terminated
    "D-0298-2015",  # Class III, all_lots, NDC, ingredients, Terminated
    "D-0370-2015",  # Class III, all_lots_window, no NDC, ingredients, Terminated
    "D-0414-2018",  # Class III, all_lots_window, no NDC, product text, Terminated
    "D-0578-2018",  # Class III, all_lots_window, NDC, ingredients, Terminated
    "D-0001-2016",  # Class III, lots, no NDC, ingredients, Terminated
    "D-0073-2018",  # Class III, lots, no NDC, product text, Terminated
    "D-0001-2017",  # Class III, lots, NDC, ingredients, Terminated
    "D-0014-2015",  # Class III, lots, NDC, product text, Terminated
]
RELATIONS = ["confirmed", "probable", "near miss", "candidate", "outside window", "decoy other lot",
             "decoy other drug"]
OTHER_LABELER_NDC = "68071-9990-03"  # synthetic: a labeler none of these recalls names
TABLES = ("memory_readsetmember, memory_readset, memory_premisesetmember, memory_premiseset, "
          "memory_decisioninput, memory_decision, "
          "memory_fact, "
          "patients_dispensingchange, patients_dispensingrecord, patients_patient")


def _alone(number: str) -> Fact:
    """The recall's facts, alone in the fact store; the fact its patients relate to."""
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {TABLES} CASCADE")
    assert_claims(recall_claims_of(number))
    facts = list(Fact.objects.believed().filter(kind="recall").order_by("lot", "id"))
    return next((f for f in facts if f.lot), facts[0])


def _day(value: str, *, end: bool = False) -> date:
    parts = [int(p) for p in str(value).split("-")]
    if len(parts) == 1:
        return date(parts[0], 12 if end else 1, 28 if end else 1)
    return date(parts[0], parts[1], parts[2] if len(parts) > 2 else (28 if end else 1))


def _dates(fact, *, inside: bool) -> dict | None:
    """Expiry and dispensing dates inside (or outside) the recall's window, before it closed."""
    attrs = fact.attributes or {}
    start = date.fromisoformat(attrs["recall_initiation_date"][:10])
    dispensed = datetime.combine(start + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    scope = recall_terms.lot_scope(fact) or {}
    expiry_window, dispensed_window = scope.get("expiry_window"), scope.get("dispensed_window")
    if scope.get("kind") != "all_lots_window" or not (expiry_window or dispensed_window):
        return {"dispensed_at": dispensed} if inside else None
    if expiry_window:
        low, high = expiry_window
        if inside:
            expiry = _day(low) if low else _day(high) - timedelta(days=200)
        else:
            expiry = _day(high, end=True) + timedelta(days=40) if high else _day(low) - timedelta(days=40)
        return {"dispensed_at": dispensed, "expiry": expiry}
    opened = datetime.combine(_day(dispensed_window[0]), datetime.min.time(), tzinfo=UTC)
    return {"dispensed_at": opened + timedelta(days=1) if inside else opened - timedelta(days=30)}


def _rows(fact, relation: str) -> dict | None:
    """The dispensing row of a synthetic patient in this relation to the recall (None: not applicable)."""
    attrs = recall_attributes(fact)
    subject, description = fact.subject, attrs.get("product_description") or ""
    drug = subject if subject and resolve(subject).key == subject else description or subject
    products = sorted(recall_terms.named_products(fact))
    package = next((n for n in attrs.get("ndcs") or [] if products and n.startswith(products[0]) and len(n) > 10),
                   f"{products[0]}-01" if products else "")
    inside = _dates(fact, inside=True)
    lot = fact.lot
    if relation == "confirmed":
        return package and dict(drug=drug, ndc=package, lot=lot or "SYNLOT1", **inside)
    if relation == "probable":
        return lot and dict(drug=drug, lot=lot, **inside)
    if relation == "near miss":
        near = lot and (lot.lstrip("0") if lot.startswith("0") else f"0{lot}")
        return lot and dict(drug=drug, ndc=package, lot=near, **inside)
    if relation == "candidate":
        return dict(drug=drug, ndc=package if lot else "", lot="" if lot else "SYNLOT2", lot_unknown=bool(lot),
                    **inside)
    if relation == "outside window":
        outside = _dates(fact, inside=False)
        return outside and package and dict(drug=drug, ndc=package, lot="SYNLOT3", **outside)
    if relation == "decoy other lot":
        return dict(drug=drug, ndc=package if lot else OTHER_LABELER_NDC, lot="ZZSYN91", **inside)
    other = "atorvastatin" if "metformin" in subject else "metformin"
    return dict(drug=other, lot=lot or "SYNLOT4", **inside)


def _name(row: DispensingRecord) -> str:
    return recall_terms.readable_product(row.drug) or "medicine"


def test_every_answer_and_letter_over_real_recalls_is_true_of_its_match(hashing_embeddings, settings):
    settings.UNSAY_ASK_REUSE_SECONDS = 0
    problems, seen, rendered = [], Counter(), 0
    kinds = Counter()
    for number in RECALLS:
        fact = _alone(number)
        kinds[(recall_terms.classification(fact), recall_terms.scope(fact), recall_terms.is_active(fact))] += 1
        for n, relation in enumerate(RELATIONS):
            row_fields = _rows(fact, relation)
            if not row_fields:
                continue
            patient = make_patient(f"SYN-{number}-{n}", [row_fields])
            row = patient.dispensings.get()
            found = explain(fact, row.as_dispensed())
            outcome = decide(patient, f"Is my {_name(row)} safe?", subject=row.drug)
            seen[(relation, str(found.klass) if found else "none")] += 1
            where = f"{number} / {relation}"
            for text, what in [(outcome.answer, "answer")] + [
                    (letter, f"{kind} {channel} {language}") for kind, channel, language, letter
                    in _letters(patient, outcome, fact, found)]:
                rendered += 1
                language = what.split()[-1] if what != "answer" else "en"
                reader = SimpleNamespace(rows=[row.as_dispensed()], preferred_language=language)
                problems += [(where, what, p, text) for p in sentence_problems(
                    text, verdict=outcome.verdict, found=found, fact=fact, patient=reader)]
            if relation.startswith("decoy") and not found:
                problems += [(where, "verdict", f"a decoy is {outcome.verdict}", outcome.answer)
                             for _ in [0] if outcome.verdict not in ("safe", "unknown")]
    assert len(RECALLS) >= 50 and rendered > 1500, (len(RECALLS), rendered)
    # The corpus holds every kind it claims, and each relation happened as built.
    assert {c for c, _s, _a in kinds} == {"Class I", "Class II", "Class III"}
    assert {(s, a) for _c, s, a in kinds} == {("lot", True), ("lot", False), ("drug", True), ("drug", False)}
    for relation, klass in [("confirmed", "confirmed"), ("confirmed", "product_all_lots"), ("probable", "probable"),
                            ("near miss", "probable"), ("candidate", "candidate"), ("outside window", "none"),
                            ("decoy other lot", "none"), ("decoy other drug", "none")]:
        assert seen[(relation, klass)] >= 3, (relation, klass, seen)
    summary = Counter(p for _w, _k, p, _t in problems)
    assert not problems, f"{len(problems)} untrue sentences {dict(summary)}; first:\n" + "\n\n".join(
        f"{w} | {k}: {p}\n{t}" for w, k, p, t in problems[:4])


def _letters(patient, outcome, fact, found):
    """(kind, channel, language, text) of every letter this outcome can be written as: a correction from
    another verdict, and, where the recall reaches the pack and the answer is not safe, a notice."""
    old = "caution" if outcome.verdict == "safe" else "safe"
    for channel in ("email", "sms"):
        for language in ("en", "es"):
            reader = SimpleNamespace(display_name="Synthetic Patient", preferred_channel=channel,
                                     preferred_language=language)
            klass = str(found.klass) if found else ""
            yield "correction", channel, language, drafting.correction_text(reader, old, outcome, fact, None,
                                                                           match_class=klass)
            if found and outcome.verdict in ("caution", "stop"):
                match = "lot" if fact.lot else "drug"
                yield "notice", channel, language, drafting.notice_text(reader, match, outcome, fact,
                                                                       match_class=klass)

