"""How pharmacies really record what they dispensed: the long-tail acceptance corpus.

The corpus (tests/fixtures/long_tail_corpus.json, written by bench/long_tail_corpus.py and never by this
test) holds labelled SYNTHETIC dispensing rows over REAL openFDA recalls, chosen by class: lot fields
carrying expiries, prefixes, GS1 strings and stray punctuation; brands nobody's vocabulary knows;
repackagers' NDCs under pharmacy abbreviations; expiry and distribution windows; all-lots Class I
recalls; near-miss lots; and decoys of named kinds. Each row goes through its entry path (admin form,
CSV import, API, FHIR MedicationDispense, GS1 scan).

As in life, every row is dispensed first; then the recalls arrive (their real records, one ingest
through recalls.services.ingest_document) and the sweep that follows a new recall runs. Then, per row:
- holder: found by exposure (patients.services.exposed_patients_for_recall) in any match class; asking
  about the medicine (ask.services.ask) never answers "safe"; a notice or correction for that recall is
  drafted (unless the record is already closed when it arrives, which drafts no letter by design:
  docs/reasoning.md); the answer and the letter pass the sentence checker when the tree has one;
- decoy: never `confirmed`; its class is one the corpus accepts for its kind (`decoy_kinds`); no letter
  for that recall unless its kind allows a pharmacist's candidate and the class is candidate;
- malformed: refused by its path with a clear error and nothing written; its corrected entry is then
  accepted and judged as a holder.
A valid row that a path refuses is a failure (the dispensing is lost). The report prints counts per
class and per path and every failing row by class; rows of held-out shapes are named by class only.
Set UNSAY_CORPUS_REPORT=<file> to also write the outcome of every row as JSON.
"""

import functools
import json
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest

from ask.keys import issue_key
from ask.models import ApiClient, ClientPatient
from ask.services import ask
from corrections.models import Correction
from corrections.sweep.run import sweep
from drugs.matching import Found, MatchClass
from memory.models import Fact
from patients.models import DispensingRecord, Patient
from patients.services import exposed_patients_for_recall
from recalls.services import ingest_document
from tests.acceptance.entry_paths import record_rows
from tests.factories import openfda_record
from tests.paths import FIXTURES, OPENFDA

CORPUS = FIXTURES / "long_tail_corpus.json"
PATHS = ("admin", "csv", "api", "fhir", "scan")


@functools.cache
def corpus() -> dict:
    return json.loads(CORPUS.read_text())


def sentence_problems_of(text: str, *, verdict: str, found, fact, patient) -> list[str]:
    """The sentence checker's problems with a patient-facing text (tests/sentences.py), judged against
    the match that was found for this patient and recall. The one place that calls it."""
    from tests.sentences import sentence_problems

    return list(sentence_problems(text, verdict=verdict, found=found, fact=fact, patient=patient))


# --- the corpus itself (no database) --------------------------------------------------------------

def test_the_corpus_is_labelled_real_and_covers_every_class_through_every_path():
    data = corpus()
    rows, recalls = data["rows"], {r["recall_number"]: r for r in data["recalls"]}
    labelled = [r for r in rows if r["label"] in ("holder", "decoy")]
    assert len(labelled) >= 300
    for recall in recalls.values():
        record = openfda_record(recall["recall_number"], OPENFDA / recall["snapshot"])
        assert (record["classification"], record["status"]) == (recall["classification"], recall["status"])
    snapshots = Counter(recall["snapshot"] for recall in recalls.values())
    newest = snapshots["drug-enforcement-recent-sample.json"] + snapshots["drug-enforcement-2023-08-05-part.json.zip"]
    assert newest * 2 >= len(recalls), snapshots
    for row in rows:
        assert row["recall"] in recalls and row["patient_ref"].startswith("SYN-LT-")
        assert row["path"] in PATHS
        if row["label"] == "decoy":
            assert row["acceptable"] == data["decoy_kinds"][row["decoy_kind"]]["acceptable"]
            assert "confirmed" not in row["acceptable"]
    classes = {(r["label"], r["class"]) for r in labelled}
    covered = {(r["label"], r["class"], r["path"]) for r in labelled}
    missing = [(label, klass, path) for label, klass in classes for path in PATHS
               if (label, klass, path) not in covered]
    assert not missing, missing
    assert {r["class"] for r in labelled if r["label"] == "holder"} == set(data["holder_kinds"])
    assert {r["decoy_kind"] for r in labelled if r["label"] == "decoy"} == set(data["decoy_kinds"])
    assert {r["path"] for r in rows if r["label"] == "malformed"} == set(PATHS)
    assert any(r["held_out"] for r in rows)


def _tight(lot: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", (lot or "").upper())


def test_exact_lots_are_the_recalls_own_and_other_lots_are_none_of_them():
    """The labels follow from the records: a holder typed with the exact lot has one of its recall's lots
    (as the record writes it), and a decoy with another lot has none of them, not even the same characters."""
    data = corpus()
    lots = {r["recall_number"]: {_tight(lot) for lot in r["lots"]} for r in data["recalls"]}
    exact = {"plain_exact", "unknown_product_brand", "lot_level_no_ndc", "repackaged_abbrev",
             "same_lot_other_product", "same_lot_no_ndc_other_name"}
    other = {"same_product_other_lot", "lot_one_char_off", "other_drug"}
    checked = 0
    for row in data["rows"]:
        typed = _tight(row["entry"]["lot"])
        if not typed:
            continue  # a scan carries the lot
        if row["class"] in exact:
            assert typed in lots[row["recall"]], row["id"]
            checked += 1
        elif row["class"] in other:
            assert typed not in lots[row["recall"]], row["id"]
            checked += 1
    assert checked >= 100


# --- the run ---------------------------------------------------------------------------------------

@dataclass
class Outcome:
    row: dict
    accepted: bool = False
    error: str = ""
    via: str = ""
    written: int = 0
    refused_first: bool | None = None  # malformed rows: refused as they should be
    first_error: str = ""
    written_after_refusal: int = 0
    match_class: str | None = None
    rule: str = ""
    verdict: str = ""
    letters: list = field(default_factory=list)       # (kind, new verdict) of this row's recall's letters
    other_letters: list = field(default_factory=list)  # recall numbers of the patient's other letters
    sentence_problems: list = field(default_factory=list)
    failures: list = field(default_factory=list)

    @property
    def judged_as(self) -> str:
        return "holder" if self.row["label"] == "malformed" else self.row["label"]

    @property
    def needs_notice(self) -> bool:
        return self.judged_as == "holder" and self.row["notice"] == "required" and self.accepted

    @property
    def notified(self) -> bool:
        return any(verdict != "safe" for _, verdict in self.letters)

    @property
    def letter_not_allowed(self) -> bool:
        """A decoy with a letter for its recall that its kind does not allow."""
        allowed = self.row["notice"] == "only_if_candidate" and self.match_class == "candidate"
        return bool(self.letters) and not allowed

    @property
    def refused_clearly(self) -> bool:
        return bool(self.refused_first) and len(self.first_error.strip()) >= 10


def _patients(rows) -> dict[str, Patient]:
    patients = Patient.objects.bulk_create([
        Patient(region="aws-us-east-1", display_name=f"Synthetic {row['patient_ref']}", external_ref=row["patient_ref"],
                email=f"{row['patient_ref'].lower()}@example.com", phone="", preferred_channel="email", synthetic=True)
        for row in rows])
    return {p.external_ref: p for p in patients}


def _written() -> Counter:
    return Counter(DispensingRecord.objects.values_list("patient__external_ref", flat=True))


# Strongest first, as exposure ranks a patient's rows (patients.services): a decoy confirmed by any fact of
# its recall is confirmed.
STRENGTH = {"confirmed": 4, "product_all_lots": 3, "probable": 2, "candidate": 1, None: 0}


def _dispense(rows, patients, outcomes, *, admin_client, client, secret) -> None:
    """Every row through its path; a malformed row, once refused with nothing written, is entered corrected."""
    entered = record_rows(rows, patients, admin_client=admin_client, client=client, secret=secret)
    written = _written()
    malformed = [row for row in rows if row["label"] == "malformed"]
    for row in malformed:
        outcome = outcomes[row["id"]]
        outcome.refused_first, outcome.first_error = not entered[row["id"]].accepted, entered[row["id"]].error
        outcome.written_after_refusal = written[row["patient_ref"]]
    retyped = [row for row in malformed if outcomes[row["id"]].refused_first
               and not outcomes[row["id"]].written_after_refusal]
    entered.update(record_rows(retyped, patients, admin_client=admin_client, client=client, secret=secret,
                               entry_of=lambda row: row["corrected"]))
    written = _written()
    for row in rows:
        outcome, result = outcomes[row["id"]], entered[row["id"]]
        outcome.accepted, outcome.error, outcome.via = result.accepted, result.error, result.via
        outcome.written = written[row["patient_ref"]]


def _recalls_arrive(recalls: list[dict]) -> None:
    """The real records in one ingest, then the sweep that follows a new recall."""
    ingest_document({"results": [openfda_record(r["recall_number"], OPENFDA / r["snapshot"]) for r in recalls]},
                    trigger="acceptance corpus")
    numbers = [r["recall_number"] for r in recalls]
    sweep(fact_ids=list(Fact.objects.filter(kind=Fact.Kind.RECALL, attributes__recall_number__in=numbers)
                        .values_list("id", flat=True)))


def _exposure(numbers, by_patient) -> dict:
    """(patient ref, recall number) -> (strongest match class, its rule, the fact it matched)."""
    found = {}
    for number in numbers:
        for exposure in exposed_patients_for_recall(number):
            ref = by_patient.get(exposure.patient.pk)
            klass = exposure.match_class.value if exposure.match_class else None
            if ref is not None and STRENGTH[klass] >= STRENGTH[found.get((ref, number), (None, "", None))[0]]:
                found[(ref, number)] = (klass, exposure.rule, exposure.fact)
    return found


def _any_fact(number):
    return (Fact.objects.believed().filter(kind=Fact.Kind.RECALL, attributes__recall_number=number)
            .order_by("id").first())


def _letters(by_patient) -> dict:
    """patient ref -> [(recall number, kind, new verdict, drafted text)] of every notice and correction."""
    letters = defaultdict(list)
    for patient_id, number, kind, verdict, text in Correction.objects.values_list(
            "patient_id", "recall_number", "kind", "new_verdict", "drafted_text"):
        if patient_id in by_patient:
            letters[by_patient[patient_id]].append((number, kind, verdict, text))
    return letters


def run_corpus(*, admin_client, client) -> list[Outcome]:
    data = corpus()
    rows = data["rows"]
    pharmacy = ApiClient.objects.create(name="Synthetic pharmacy (long-tail corpus)")
    secret = issue_key(pharmacy)[1]
    patients = _patients(rows)
    ClientPatient.objects.bulk_create([ClientPatient(client=pharmacy, patient=p) for p in patients.values()])
    outcomes = {row["id"]: Outcome(row) for row in rows}

    _dispense(rows, patients, outcomes, admin_client=admin_client, client=client, secret=secret)
    _recalls_arrive(data["recalls"])

    by_patient = {p.pk: ref for ref, p in patients.items()}
    exposure = _exposure([r["recall_number"] for r in data["recalls"]], by_patient)
    letters = _letters(by_patient)
    for row in rows:
        outcome = outcomes[row["id"]]
        ref, number = row["patient_ref"], row["recall"]
        outcome.match_class, outcome.rule, fact = exposure.get((ref, number), (None, "", None))
        found = Found(MatchClass(outcome.match_class), outcome.rule) if outcome.match_class else None
        fact = fact or _any_fact(number)
        outcome.letters = [(kind, verdict) for n, kind, verdict, _ in letters[ref] if n == number]
        outcome.other_letters = sorted({n for n, *_ in letters[ref] if n != number})
        texts = [(verdict, text) for n, _, verdict, text in letters[ref] if n == number]
        if outcome.judged_as == "holder" and outcome.written:
            decision = ask(patients[ref], row["question"])
            outcome.verdict = decision.verdict
            texts.append((decision.verdict, decision.answer))
        for verdict, text in texts:
            outcome.sentence_problems.extend(
                sentence_problems_of(text, verdict=verdict, found=found, fact=fact, patient=patients[ref]))
        judge(outcome)
    return list(outcomes.values())


# --- judging one row --------------------------------------------------------------------------------

def judge(outcome: Outcome) -> None:
    row, fail = outcome.row, outcome.failures.append
    if row["label"] == "malformed":
        if not outcome.refused_first:
            fail("malformed row accepted")
            return
        if outcome.written_after_refusal:
            fail("refused but written in part")
        if not outcome.refused_clearly:
            fail("refused without a clear error")
    if not outcome.accepted or not outcome.written:
        fail(f"refused: {outcome.error}" if not outcome.accepted else "accepted but nothing written")
        return
    klass = outcome.match_class
    if outcome.judged_as == "holder":
        if klass is None:
            fail("holder not found")
        if outcome.verdict == "safe":
            fail("holder told safe")
        if row["notice"] == "required" and not outcome.notified:
            fail("no notice drafted" + (f" (letters for {', '.join(outcome.other_letters)})"
                                        if outcome.other_letters else ""))
    else:
        if klass == "confirmed":
            fail("decoy confirmed")
        elif klass not in row["acceptable"]:
            fail(f"decoy matched as {klass}")
        if outcome.letter_not_allowed:
            fail("letter drafted for a decoy")
    if outcome.sentence_problems:
        fail("sentences: " + "; ".join(outcome.sentence_problems[:3]))


# --- the report -------------------------------------------------------------------------------------------

def _describe(outcome: Outcome) -> str:
    row = outcome.row
    where = row["path"] + (f"/{outcome.via}" if outcome.via else "")
    found = f"class {outcome.match_class}" + (f" ({outcome.rule})" if outcome.rule else "")
    if row["held_out"]:
        return f"{row['id']} [{where}] {row['recall']} held-out shape: {'; '.join(outcome.failures)}"
    entry = row["entry"]
    typed = {k: entry[k] for k in ("drug", "product_description", "ndc", "lot", "expiry", "scan") if entry.get(k)}
    return (f"{row['id']} [{where}] {row['recall']} {json.dumps(typed, ensure_ascii=True)} -> {found}, "
            f"verdict {outcome.verdict or '-'}: {'; '.join(outcome.failures)}")


def report(outcomes: list[Outcome]) -> str:
    lines = []
    holders = [o for o in outcomes if o.judged_as == "holder"]
    decoys = [o for o in outcomes if o.judged_as == "decoy"]
    checker = "tests/sentences.py"
    failing = [o for o in outcomes if o.failures]
    lines.append(f"Long-tail corpus: {len(outcomes)} rows ({len(holders)} holders incl. corrected malformed rows, "
                 f"{len(decoys)} decoys) over {len(corpus()['recalls'])} real recalls; sentence checker {checker}; "
                 f"failing rows: {len(failing)}")

    def table(title, columns, group_of, members):
        groups = defaultdict(list)
        for o in members:
            groups[group_of(o)].append(o)
        lines.append(f"\n{title:28s} rows " + " ".join(name for name, _ in columns))
        for name in sorted(groups):
            cells = " ".join(f"{sum(bool(test(o)) for o in groups[name]):{len(head)}d}" for head, test in columns)
            lines.append(f"{name:28s} {len(groups[name]):4d} {cells}")

    holder_columns = [("found", lambda o: o.match_class is not None),
                      ("missed", lambda o: o.accepted and o.match_class is None),
                      ("not-safe", lambda o: o.verdict and o.verdict != "safe"),
                      ("told-safe", lambda o: o.verdict == "safe"),
                      ("notices", lambda o: o.needs_notice and o.notified),
                      ("missing", lambda o: o.needs_notice and not o.notified),
                      ("refused", lambda o: not o.accepted)]
    decoy_columns = [("confirmed", lambda o: o.match_class == "confirmed"),
                     ("unaccepted", lambda o: o.accepted and o.match_class not in o.row["acceptable"]),
                     ("letters", lambda o: o.letter_not_allowed),
                     ("refused", lambda o: not o.accepted),
                     ("candidate", lambda o: o.match_class == "candidate")]
    malformed_columns = [("refused-clearly", lambda o: o.refused_clearly),
                         ("accepted", lambda o: not o.refused_first),
                         ("written-in-part", lambda o: o.written_after_refusal),
                         ("corrected-accepted", lambda o: o.refused_first and o.accepted)]
    table("holders by class", holder_columns, lambda o: o.row["class"], holders)
    table("holders by path", holder_columns, lambda o: o.row["path"], holders)
    table("decoys by kind", decoy_columns, lambda o: o.row["decoy_kind"], decoys)
    table("decoys by path", decoy_columns, lambda o: o.row["path"], decoys)
    table("malformed rows by path", malformed_columns, lambda o: o.row["path"],
          [o for o in outcomes if o.row["label"] == "malformed"])
    ideal = Counter((o.row["class"], o.row["ideal"], o.match_class) for o in holders if o.accepted)
    lines.append("\nholder classes found, against the class each ideally gets: "
                 + "; ".join(f"{k}: {i}->{m}={n}" for (k, i, m), n in sorted(ideal.items(), key=str)))
    by_class = defaultdict(list)
    for o in failing:
        by_class[("malformed" if o.row["label"] == "malformed" else o.row["class"])].append(o)
    lines.append("\nfailing rows by class:")
    for name in sorted(by_class):
        reasons = Counter(f.split(":")[0] for o in by_class[name] for f in o.failures)
        lines.append(f"  {name} ({len(by_class[name])}; {dict(reasons)}):")
        lines.extend(f"    {_describe(o)}" for o in by_class[name])
    return "\n".join(lines)


def _write_outcomes(outcomes: list[Outcome]) -> None:
    path = os.environ.get("UNSAY_CORPUS_REPORT")
    if not path:
        return
    with open(path, "w") as out:
        json.dump([{"id": o.row["id"], "label": o.row["label"], "class": o.row["class"], "path": o.row["path"],
                    "via": o.via, "held_out": o.row["held_out"], "recall": o.row["recall"], "accepted": o.accepted,
                    "error": o.error, "first_error": o.first_error, "match_class": o.match_class, "rule": o.rule,
                    "verdict": o.verdict, "letters": o.letters, "other_letters": o.other_letters,
                    "failures": o.failures} for o in outcomes], out, indent=1)


@pytest.mark.django_db(transaction=True)
def test_every_holder_is_found_never_told_safe_and_notified_and_no_decoy_is_confirmed(
        admin_client, client, hashing_embeddings, monkeypatch):
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)  # swept below, as it follows
    # The corpus posts a few hundred rows in seconds through one pharmacy key, faster than a till would; the
    # per-key rate limit is tested where it lives (tests/api).
    monkeypatch.setattr("django.conf.settings.UNSAY_API_RATE_PER_MINUTE", 100_000)
    outcomes = run_corpus(admin_client=admin_client, client=client)
    _write_outcomes(outcomes)
    text = report(outcomes)
    print(text)
    assert not [o for o in outcomes if o.failures], text
