"""The rules reasoner and the guardrail on REAL openFDA recall records, as the ingestion code turns
them into facts (tests/factories.py). Patients and dispensing are synthetic."""

import pytest

from ask.rules import ReasonerResult
from ask.services import Outcome, ask, decide, record_outcome, resolve_subject
from core.retry import run_in_transaction
from memory.fact_writes import assert_claim
from memory.models import Fact
from tests.factories import make_patient, recall_claim

pytestmark = pytest.mark.django_db(transaction=True)


def facts_by_key(outcome: Outcome):
    return {r.fact.fact_key: r.fact for r in outcome.retrieved}


def test_class_ii_ongoing_recall_on_the_patients_valsartan_lot_is_caution(hashing_embeddings):
    hit = assert_claim(recall_claim("D-0315-2019", "3061169")).fact          # Class II, Ongoing, Mylan valsartan
    other = assert_claim(recall_claim("D-0324-2019", "3063780")).fact        # same drug, a lot they did not get
    patient = make_patient("SYN-V1", [("Valsartan Tablets USP 40 mg", "Lot # 3061169")])

    outcome = decide(patient, "Is my valsartan safe to take?")

    assert outcome.verdict == "caution"
    assert outcome.subject == "valsartan"
    assert {hit.id, other.id} <= {f.id for f in facts_by_key(outcome).values()}
    assert outcome.load_bearing_ids == {hit.id}  # the other lot is shown, not load-bearing
    assert "D-0315-2019" in outcome.answer and "3061169" in outcome.answer
    assert "N-nitrosodiethylamine" in outcome.answer or "NDEA" in outcome.answer  # the real reason
    assert "stop taking" not in outcome.answer.lower()
    assert "Do not stop valsartan on your own" in outcome.answer
    assert outcome.reasoner == "rules/1" and outcome.guardrail_override == ""


def test_class_i_ongoing_recall_on_the_patients_lot_says_contact_the_pharmacy_now(hashing_embeddings):
    hit = assert_claim(recall_claim("D-0081-2019", "MON17384")).fact  # Class I montelukast label mix-up
    patient = make_patient("SYN-M1", [("Montelukast Tablets 10 mg", "MON17384")])

    outcome = decide(patient, "Can I keep using my montelukast?")

    assert outcome.verdict == "stop"
    assert outcome.load_bearing_ids == {hit.id}
    assert "Contact your pharmacy now" in outcome.answer and "D-0081-2019" in outcome.answer
    assert "stop taking" not in outcome.answer.lower()


def test_class_iii_ongoing_recall_is_informational_caution_and_never_says_stop(hashing_embeddings):
    hit = assert_claim(recall_claim("D-0471-2017", "MJ7746")).fact  # Class III aripiprazole
    patient = make_patient("SYN-A1", [("Aripiprazole Tablets, 2 mg", "MJ7746")])

    outcome = decide(patient, "is my aripiprazole ok")

    assert outcome.verdict == "caution"
    assert outcome.load_bearing_ids == {hit.id}
    assert "Class III" in outcome.answer and "unlikely to cause health problems" in outcome.answer
    assert "Do not stop aripiprazole on your own" in outcome.answer


def test_a_terminated_recall_on_the_patients_lot_is_never_safe(hashing_embeddings):
    """FDA terminates a recall when the removal is complete; the pack dispensed is still from the
    recalled lot. The verdict is the one its class demands, and the answer says the recall is closed."""
    closed = assert_claim(recall_claim("D-1047-2019", "179791")).fact  # Class II valsartan, Terminated
    patient = make_patient("SYN-V2", [("valsartan", "179791")])

    outcome = decide(patient, "Is my valsartan affected by a recall?")

    assert outcome.verdict == "caution"
    assert "D-1047-2019" in outcome.answer and "closed" in outcome.answer and "recalled lot" in outcome.answer
    assert closed.id in outcome.load_bearing_ids
    # and the same recall while still open gives the same verdict: closing it moves nothing
    open_version = assert_claim(recall_claim("D-1047-2019", "179791", status="Ongoing", termination_date="")).fact
    assert decide(patient, "Is my valsartan affected by a recall?").verdict == "caution"
    assert open_version.attributes["status"] == "Ongoing"


def test_closing_a_recall_keeps_a_lot_unknown_pack_dispensed_while_it_was_open_a_candidate(hashing_embeddings):
    """A recall of some lots, a pack of the drug whose lot was not recorded: a candidate (caution) while the
    recall is open, and still one once FDA closes it, since the pack was dispensed before (closing moves no
    verdict, as for a recorded lot); a pack dispensed after the recall closed is not a candidate of it."""
    from datetime import UTC, datetime

    before = make_patient("SYN-V2U", [dict(drug="valsartan", lot="", lot_unknown=True)],
                          dispensed_at=datetime(2019, 6, 1, 12, tzinfo=UTC))
    after = make_patient("SYN-V2A", [dict(drug="valsartan", lot="", lot_unknown=True)],
                         dispensed_at=datetime(2021, 1, 5, 12, tzinfo=UTC))
    assert_claim(recall_claim("D-1047-2019", "179791", status="Ongoing", termination_date=""))  # Class II valsartan
    for patient in (before, after):
        assert decide(patient, "Is my valsartan safe?").verdict == "caution"
    closed = assert_claim(recall_claim("D-1047-2019", "179791")).fact  # as FDA published it: Terminated
    assert closed.attributes["status"] == "Terminated"
    still = decide(before, "Is my valsartan safe?")
    assert still.verdict == "caution" and "D-1047-2019" in still.answer and closed.id in still.load_bearing_ids
    assert decide(after, "Is my valsartan safe?").verdict == "unknown"


def test_an_expiry_window_includes_a_pack_only_as_far_as_its_expiry_is_on_record(hashing_embeddings):
    """D-1113-2018 recalls every lot of Camber valsartan expiring 7/2018 to 6/2020. A pack of a product it
    names with no expiry on record stays in (fail safe) but is not said to be inside the window."""
    from datetime import date

    from tests.factories import recall_claims_of

    for claim in recall_claims_of("D-1113-2018"):
        assert_claim(claim)
    undated = make_patient("SYN-W1", [("valsartan", "CAMB001", "31722-0745-30")])
    dated = make_patient("SYN-W2", [dict(drug="valsartan", lot="CAMB002", ndc="31722-0745-30",
                                         expiry=date(2019, 9, 30))])
    told = decide(undated, "Is my valsartan safe?")
    assert told.verdict == "caution" and "D-1113-2018" in told.answer
    assert "no expiry date on record for your pack, so it may be one of them" in told.answer
    assert "which includes your pack" not in told.answer
    inside = decide(dated, "Is my valsartan safe?").answer
    assert "which includes your pack as far as our records show" in inside
    assert "The valsartan dispensed to you is a recalled product" in inside


def test_drug_level_recall_without_lot_information_is_caution_saying_so(hashing_embeddings):
    # D-0419-2019: a real compounded promethazine recall whose code_info is "N/A": it names no lot.
    drug_level = assert_claim(recall_claim("D-0419-2019", None)).fact
    assert drug_level.lot is None and drug_level.attributes["scope"] == "drug"
    assert "names no lot number, so every lot is treated as affected" in drug_level.statement
    patient = make_patient("SYN-P3", [("promethazine", "ZZ-SYN-1")])

    outcome = decide(patient, "Is my promethazine safe?")

    assert outcome.verdict == "caution"
    assert outcome.load_bearing_ids == {drug_level.id}
    # Ingestion gives every drug-level fact a lot_scope of kind "all_lots", so every lot is treated as
    # affected (over-notify) and the answer says why, without claiming the text says "all lots". It used
    # to add "including yours", which was not true: no NDC is on record for this pack, so whether it is
    # the recalled product is what we do not know, and the answer says so and asks for the NDC.
    assert "every lot (no lot number could be read from the recall, so every lot is treated as affected)" \
        in outcome.answer
    assert "No product code (NDC) is on record for your pack" in outcome.answer
    assert "we cannot tell whether yours is one of the products it recalls" in outcome.answer and \
        "product code (NDC) printed" in \
        outcome.answer
    assert "including yours" not in outcome.answer and "covers every lot" not in outcome.answer
    # with the NDC the recall names, the pack is the recalled product
    named = make_patient("SYN-P3N", [("promethazine", "ZZ-SYN-1", "00002-1901-03")])
    confirmed = decide(named, "Is my promethazine safe?")
    assert confirmed.verdict == "caution" and "is a recalled product" in confirmed.answer
    assert "unaffected lot" not in confirmed.answer


def test_a_drug_level_fact_from_before_lot_scopes_says_it_cannot_tell_from_the_lot(hashing_embeddings):
    """A fact ingested before lot_scope existed keeps its attributes (re-ingestion does not re-version a
    fact whose meaning is unchanged): the same real record's claim without `lot_scope`, nothing else changed."""
    claim = recall_claim("D-0419-2019", None)
    del claim.attributes["lot_scope"]
    drug_level = assert_claim(claim).fact
    patient = make_patient("SYN-P4", [("promethazine", "ZZ-SYN-1")])

    outcome = decide(patient, "Is my promethazine safe?")

    assert outcome.verdict == "caution"
    assert outcome.load_bearing_ids == {drug_level.id}
    # The lot as stored: canonical (drugs.lots.canonical_lot), the form recall lots are compared in.
    assert "does not list lot numbers" in outcome.answer and "ZZSYN1" in outcome.answer
    assert "covers every lot" not in outcome.answer


def test_drug_level_recall_of_every_lot_is_caution_saying_it_covers_theirs(hashing_embeddings):
    drug_level = assert_claim(recall_claim("D-0971-2018", None)).fact  # Solco valsartan, "All lots within expiry."
    assert drug_level.lot is None and drug_level.attributes["scope"] == "drug"
    patient = make_patient("SYN-V3", [("valsartan", "ZZ-SYN-1")])

    outcome = decide(patient, "Is my valsartan safe?")

    assert outcome.verdict == "caution"
    assert outcome.load_bearing_ids == {drug_level.id}
    # It covers every unexpired lot of Solco's products; this pack has no NDC on record, so "including
    # yours" (said before) was not known: the answer says the window and what is not known.
    assert "every lot with an expiry date on or after July 13, 2018" in outcome.answer
    assert "No product code (NDC) is on record for your pack" in outcome.answer
    assert "including yours" not in outcome.answer and "does not list lot numbers" not in outcome.answer
    solco = make_patient("SYN-V3S", [("valsartan", "ZZ-SYN-1", "43547-0370-09")])  # the NDC the recall names
    confirmed = decide(solco, "Is my valsartan safe?")
    # No expiry on record: the pack stays in (fail safe, the same verdict), but is not said to be inside the
    # window, nor to be a recalled product.
    assert confirmed.verdict == "caution" and "The valsartan dispensed to you may be a recalled product" in \
        confirmed.answer
    assert "is a recalled product" not in confirmed.answer
    assert "no expiry date on record for your pack, so it may be one of them" in confirmed.answer
    assert "Every lot of this product with an expiry date on or after July 13, 2018 is recalled" in confirmed.answer
    assert "unaffected lot" not in confirmed.answer and "a replacement that is not recalled" in confirmed.answer
    from datetime import date

    dated = make_patient("SYN-V3D", [dict(drug="valsartan", lot="ZZ-SYN-2", ndc="43547-0370-09",
                                          expiry=date(2019, 12, 31))])
    inside = decide(dated, "Is my valsartan safe?").answer
    assert "which includes your pack as far as our records show" in inside
    assert "The valsartan dispensed to you is a recalled product" in inside


def test_a_drug_level_recall_listing_other_makers_ndcs_does_not_apply_but_is_what_safe_rests_on(
        hashing_embeddings):
    solco = assert_claim(recall_claim("D-0971-2018", None)).fact
    assert "43547-0370-09" in solco.attributes["ndcs"]
    mylan = make_patient("SYN-V5", [("valsartan", "ZZ-SYN-3", "00378-5814-77")])
    solco_patient = make_patient("SYN-V6", [("valsartan", "ZZ-SYN-4", "43547-0370-09")])

    safe = decide(mylan, "Is my valsartan safe?")
    assert safe.verdict == "safe" and safe.load_bearing_ids == {solco.id}
    assert "other makers (D-0971-2018)" in safe.answer
    assert decide(solco_patient, "Is my valsartan safe?").verdict == "caution"
    assert decide(mylan, "Is my valsartan safe?", reasoner=SaysSafe()).guardrail_override == ""


def test_a_safe_verdict_rests_on_its_premises_and_a_lot_added_to_a_recall_makes_it_stale(hashing_embeddings):
    from corrections.sweep.staleness import NEW_FACT, stale_reasons

    other_a = assert_claim(recall_claim("D-0315-2019", "3061169")).fact
    other_b = assert_claim(recall_claim("D-0324-2019", "3063780")).fact
    patient = make_patient("SYN-V4", [("valsartan", "ZZ-SYN-2")])

    decision = ask(patient, "Is my valsartan safe?")

    assert decision.verdict == "safe"
    reads = {r.fact_id: r for r in decision.reads.all()}
    # other lots are context, not what "safe" rests on; the premises are this lot and the drug level
    assert not reads[other_a.id].load_bearing and not reads[other_b.id].load_bearing
    assert set(decision.premises.values_list("scope", flat=True)) == {"drug:valsartan|ZZSYN2", "drug:valsartan|*",
                                                                          "lot:~ZZSYN2"}
    assert "D-0315-2019" in decision.answer and "do not match the lot number on record" in decision.answer
    assert stale_reasons([decision.id])[decision.id] == []

    # The recall is amended to list this patient's lot: a new fact, no retraction of anything read.
    added = assert_claim(recall_claim("D-0315-2019", "ZZ-SYN-2",
                                      code_info="Lot # 3061169, ZZ-SYN-2, exp. date 11/2018")).fact
    [reason] = stale_reasons([decision.id])[decision.id]
    assert (reason.kind, reason.fact_id) == (NEW_FACT, added.id)


def test_subject_comes_from_the_question_then_the_only_drug_else_a_question_back(hashing_embeddings):
    two = make_patient("SYN-T1", [("valsartan", "L1"), ("Amlodipine and Valsartan Tablets", "L2"),
                                   ("montelukast", "L3")])
    assert resolve_subject(two, "Is my montelukast ok?") == ("montelukast", "")
    assert resolve_subject(two, "what about amlodipine valsartan 10/160?") == ("amlodipine+valsartan", "")
    assert resolve_subject(two, "Is my valsartan safe?") == ("valsartan", "")
    subject, back = resolve_subject(two, "Is my medicine safe?")
    assert subject is None and "Which medicine" in back and "montelukast" in back
    one = make_patient("SYN-T2", [("valsartan", "L9")])
    assert resolve_subject(one, "Is my medicine safe?") == ("valsartan", "")
    assert resolve_subject(one, "x", subject="Montelukast Tablets, 10 mg") == ("montelukast", "")
    # a drug named but not on file is answered about that drug, never about the one on file
    assert resolve_subject(one, "Is my metformin safe?") == ("metformin", "")
    subject, back = resolve_subject(one, "asdf qwerty")  # nonsense asks back
    assert subject is None and "valsartan" in back

    decision = ask(two, "Is my medicine safe?")
    assert decision.verdict == "unknown" and "Which medicine" in decision.answer and decision.reads.count() == 0


class SaysSafe:
    uses_model = False
    identity = "test/says-safe"

    def decide(self, ctx):
        return ReasonerResult("safe", "All good, keep going.", self.identity, set())


def test_guardrail_raises_a_safe_verdict_with_an_active_class_i_on_their_lot_and_records_it(hashing_embeddings):
    class_one = assert_claim(recall_claim("D-0081-2019", "MON17384")).fact
    patient = make_patient("SYN-G1", [("montelukast", "MON17384")])

    outcome = decide(patient, "Is my montelukast safe?", reasoner=SaysSafe())
    assert outcome.verdict == "stop" and outcome.reasoner_verdict == "safe"
    assert "D-0081-2019" in outcome.guardrail_override and class_one.id in outcome.load_bearing_ids
    assert "All good" not in outcome.answer

    decision = run_in_transaction(record_outcome, outcome, patient=patient, question="Is my montelukast safe?")
    decision.refresh_from_db()
    assert (decision.verdict, decision.reasoner_verdict, decision.reasoner) == ("stop", "safe", "test/says-safe")
    assert decision.guardrail_override
    assert decision.reads.get(fact=class_one).load_bearing


def test_guardrail_raises_safe_even_when_the_recall_on_their_lot_is_terminated(hashing_embeddings):
    closed = assert_claim(recall_claim("D-1047-2019", "179791")).fact
    patient = make_patient("SYN-G2", [("valsartan", "179791")])
    outcome = decide(patient, "Is my valsartan safe?", reasoner=SaysSafe())
    assert outcome.verdict == "caution" and outcome.reasoner_verdict == "safe"
    assert "D-1047-2019" in outcome.guardrail_override and closed.id in outcome.load_bearing_ids


def test_ask_records_the_read_set_with_versions_ranks_and_fingerprint(hashing_embeddings):
    assert_claim(recall_claim("D-0315-2019", "3061169"))
    patient = make_patient("SYN-R1", [("valsartan", "3061169")])

    decision = ask(patient, "Is my valsartan safe?")

    reads = list(decision.reads.all())
    assert [r.rank for r in reads] == list(range(1, len(reads) + 1))
    first = reads[0]
    assert (first.fact_key, first.fact_version, first.load_bearing) == ("recall:D-0315-2019:lot:3061169", 1, True)
    assert first.fact.is_believed and len(decision.inputs_hash) == 64
    assert Fact.objects.filter(read_set_members__read_set__decisions=decision).count() == len(reads)


def test_a_fact_retracted_while_the_model_thinks_is_never_recorded_as_read(hashing_embeddings, monkeypatch):
    """The model path decides outside the transaction; the record step share-locks the reads and
    re-decides with the rules if one was retracted meanwhile (so the sweep can't miss the decision)."""
    from ask import services as ask_module

    assert_claim(recall_claim("D-0315-2019", "3061169"))
    patient = make_patient("SYN-S1", [("valsartan", "3061169")])

    class SlowModel:
        uses_model = True
        identity = "test/model"

        def decide(self, ctx):
            # A new version (recall escalated) lands while "the model" is thinking.
            assert_claim(recall_claim("D-0315-2019", "3061169", classification="Class I"))
            return ReasonerResult("caution", "Recalled.", self.identity, {ctx.retrieved[0].fact.id})

    real = ask_module.get_reasoner
    monkeypatch.setattr(ask_module, "get_reasoner", lambda name=None: real(name) if name else SlowModel())
    decision = ask(patient, "Is my valsartan safe?")

    assert decision.reasoner == "rules/1 (facts changed while deciding)"
    assert decision.verdict == "stop"
    assert all(r.fact.is_believed for r in decision.reads.select_related("fact"))
    assert decision.reads.get(fact_key="recall:D-0315-2019:lot:3061169").fact_version == 2


def test_a_safe_verdict_reads_every_fact_in_its_premises_even_beyond_top_k(hashing_embeddings):
    from corrections.sweep.staleness import stale_reasons

    drug_levels = [assert_claim(recall_claim(n, None)).fact for n in ("D-0971-2018", "D-0968-2018")]
    for lot in ("3069019", "3069020", "3069021"):
        assert_claim(recall_claim("D-0326-2019", lot))
    patient = make_patient("SYN-K1", [("valsartan", "ZZ-SYN-9", "00378-5814-77")])

    decision = ask(patient, "Is my valsartan safe?")

    assert decision.verdict == "safe"  # both drug-level recalls list other makers' NDCs
    for fact in drug_levels:
        assert decision.reads.get(fact=fact).load_bearing
    # one of them is amended (new version): the retracted read makes this safe answer stale
    assert_claim(recall_claim("D-0971-2018", None, status="Terminated"))
    assert {r.kind for r in stale_reasons([decision.id])[decision.id]} == {"retracted_read", "new_fact"}


def test_a_drug_not_dispensed_to_the_patient_is_unknown_and_asks_for_the_lot(hashing_embeddings):
    lot_fact = assert_claim(recall_claim("D-0315-2019", "3061169")).fact
    patient = make_patient("SYN-N1", [("montelukast", "L1")])

    outcome = decide(patient, "Is valsartan safe?", subject="valsartan")

    # Nothing of this drug dispensed: a short answer asking for the lot, resting on the drug level only.
    assert outcome.verdict == "unknown" and outcome.premises == ["drug:valsartan|*"]
    assert lot_fact.id not in outcome.load_bearing_ids and len(outcome.answer) < 300
    assert "no record of valsartan dispensed to you" in outcome.answer and "D-0315-2019" in outcome.answer


def test_a_question_naming_a_drug_not_on_file_is_answered_about_that_drug_not_the_one_on_file(hashing_embeddings):
    """Found trying the demo: a patient with only escitalopram asked "Is my valsartan safe?" and was
    told "safe" about escitalopram. The named drug must win over the only drug on file."""
    assert_claim(recall_claim("D-0315-2019", "3061169"))
    patient = make_patient("SYN-N2", [("escitalopram", "ES1")])

    assert resolve_subject(patient, "Is my valsartan safe?") == ("valsartan", "")
    assert resolve_subject(patient, "Is my medicine safe?") == ("escitalopram", "")  # names nothing: the only drug
    decision = ask(patient, "Is my valsartan safe?")
    assert decision.subject == "valsartan" and decision.verdict == "unknown"
    assert "no record of valsartan dispensed to you" in decision.answer


def test_a_near_miss_lot_is_never_safe_and_the_answer_says_probable_not_sure(hashing_embeddings):
    """D-0502-2019 (real, Class II) recalls losartan lot 4L67C035; the pack's lot was typed with a
    leading zero. The guardrail holds the floor for a probable match, and the rules' answer says
    "may be", with the lot on record and the recalled one."""
    assert_claim(recall_claim("D-0502-2019", "4L67C035"))
    patient = make_patient("SYN-G3", [("Losartan potassium 50 mg tablets", "04L67C035", "13668-0409-30")])
    guarded = decide(patient, "Is my losartan safe?", reasoner=SaysSafe())
    assert guarded.verdict == "caution" and guarded.reasoner_verdict == "safe" and guarded.guardrail_override
    answer = decide(patient, "Is my losartan safe?").answer
    assert "may be from a recalled lot" in answer and "(04L67C035) is very close to recalled lot 4L67C035" in answer
    sure = make_patient("SYN-G4", [("Losartan potassium 50 mg tablets", "4L67-C035", "13668-0409-30")])
    assert "is from a recalled lot" in decide(sure, "Is my losartan safe?").answer
