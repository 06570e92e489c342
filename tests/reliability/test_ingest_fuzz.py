"""A fuzzer over ingestion: hypothesis mutations of real openFDA
records (NUL, lone surrogates, wrong types, integer NDCs, lenient or out-of-range dates, URL syntax
in recall numbers, too many lots, deep nesting, non-objects, harmless Unicode) mixed with untouched
neighbours. Bounded budget for CI: FUZZ_DOCUMENTS documents of 40 records, 30 of them mutated
(>= 600 mutated records by default). Every run finishes, every bad record is quarantined with a
reason, every good record (untouched or harmlessly mutated) is written."""

import copy
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recalls.models import IngestRun, QuarantinedRecord, RecallRecord
from recalls.quarantine import kept_form, record_digest
from recalls.services import ingest_document
from tests.reliability.openfda_records import mutation, unique_good_records

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FUZZ_DOCUMENTS = int(os.environ.get("UNSAY_FUZZ_DOCUMENTS", "20"))
PER_DOCUMENT, MUTATED_PER_DOCUMENT = 40, 30


def test_mutated_real_records_never_crash_a_run_and_lose_no_neighbour(hashing_embeddings):
    bases = iter(unique_good_records())
    totals = {"mutated": 0, "quarantined": 0, "written": 0, "documents": 0}

    @settings(max_examples=FUZZ_DOCUMENTS, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one_document(data):
        chosen = [next(bases) for _ in range(PER_DOCUMENT)]
        records, must_write, must_quarantine, bad_records = [], [], [], []
        for index, base in enumerate(chosen):
            if index % 4 == 3:  # every fourth record untouched: the neighbours
                records.append(copy.deepcopy(base))
                must_write.append(base["recall_number"])
                continue
            mutated, bad = data.draw(mutation(base), label=f"record {index}")
            records.append(mutated)
            totals["mutated"] += 1
            (must_quarantine if bad else must_write).append(base["recall_number"])
            if bad:
                bad_records.append(mutated)
        order = data.draw(st.permutations(range(len(records))), label="order")
        run = ingest_document({"meta": {}, "results": [records[i] for i in order]}, chunk_size=25)

        assert run.status == IngestRun.Status.SUCCEEDED and run.fetched == len(records)
        quarantined = list(QuarantinedRecord.objects.filter(run=run))
        # Every bad record is counted by the run; records of the same content from the same file are one row
        # (recalls.quarantine: a record is kept once per content and source).
        assert run.quarantined == len(must_quarantine)
        distinct = {record_digest(kept_form(record)) for record in bad_records}
        assert len(quarantined) == len(distinct), [q.reason for q in quarantined]
        assert all(q.reason.strip() for q in quarantined)
        written = set(RecallRecord.objects.filter(last_run=run).values_list("recall_number", flat=True))
        assert set(must_write) <= written, f"good records lost: {sorted(set(must_write) - written)}"
        assert not written & set(must_quarantine)
        totals["quarantined"] += len(quarantined)
        totals["written"] += len(written)
        totals["documents"] += 1

    one_document()
    assert totals["mutated"] >= MUTATED_PER_DOCUMENT * FUZZ_DOCUMENTS
    print(f"\nfuzz: {totals['documents']} documents, {totals['mutated']} mutated records, "
          f"{totals['quarantined']} quarantined with a reason, {totals['written']} written, 0 crashes")
