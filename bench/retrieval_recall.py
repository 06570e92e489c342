"""Recall@8 of retrieval's fill routes (memory.retrieval.ROUTES) on the labelled real questions of
tests/fixtures/retrieval_questions.json (built by bench/retrieval_questions.py from the 12,504-record bulk
file, labelled by a rule over the records, not by retrieval).

    .venv/bin/python bench/retrieval_recall.py              # load the bulk file (local MiniLM), then measure
    .venv/bin/python bench/retrieval_recall.py --reuse      # measure on what bench_retrieval already holds

Each question is asked of memory.retrieval.fill alone (k=8, no subject or lot: the exact matches that come
first in retrieve() are the same whatever the route, so only the fill tells the routes apart). Recall@8 of a
question: the relevant facts among the 8 returned, over min(8, relevant facts believed); the table gives the
mean per kind and over all, and the share of questions with at least one relevant fact in the 8.
"backfill" is measured with every fact embedded (then it is the vector route) and with none embedded (then
it is the text route): the store's two ends while a backlog drains.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
QUESTIONS = ROOT / "tests/fixtures/retrieval_questions.json"
BULK = ROOT / "tests/fixtures/openfda/drug-enforcement-2021-04-28.json.zip"
K = 8


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default=os.environ.get("UNSAY_DB_NAME", "bench_retrieval"))
    parser.add_argument("--reuse", action="store_true", help="measure on the facts the database already holds")
    parser.add_argument("--embeddings", choices=["local", "hashing"], default="local")
    args = parser.parse_args()
    if not args.db.startswith("bench_"):
        parser.error("--db must start with bench_ (the benchmark empties it)")
    os.environ.update(UNSAY_DB_NAME=args.db, UNSAY_PROFILE="test", UNSAY_EMBEDDINGS=args.embeddings,
                      UNSAY_EMBEDDING_DIM="384", UNSAY_EMBED_ON_COMMIT="0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from memory.models import Fact
    from memory.retrieval import ROUTES, fill
    from memory.vectors import embed_backlog
    from recalls.documents import load_document
    from recalls.services import ingest_document

    call_command("migrate", verbosity=0)
    if not args.reuse:
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE memory_fact, recalls_recallrecord, recalls_quarantinedrecord, "
                           "recalls_ingestrun RESTART IDENTITY CASCADE")
        started = time.perf_counter()
        run = ingest_document(load_document(str(BULK)), source_ref=str(BULK), trigger="bench", workers=2)
        print(f"ingested {run.fetched} records, {run.new_facts} facts in {time.perf_counter() - started:.0f}s")
    report = embed_backlog()
    print(f"embedding backlog: {report.summary()}")
    questions = json.loads(QUESTIONS.read_text())["questions"]
    facts = {f.id: (f.attributes.get("recall_number"), f.lot)
             for f in Fact.objects.believed().only("id", "attributes", "lot").iterator()}
    believed = {}
    for number, lot in facts.values():
        believed.setdefault(number, []).append(lot)
    print(f"{len(questions)} questions over {len(facts)} believed facts; load average {os.getloadavg()[0]:.1f}\n")

    def relevant(question, fact_id):
        number, lot = facts[fact_id]
        return any(number == n and (want is None or lot in (want, None)) for n, want in question["relevant"])

    def wanted(question):
        return sum(1 for n, want in question["relevant"] for lot in believed.get(n, ())
                   if want is None or lot in (want, None))

    def measure(route):
        scores, started = {}, time.perf_counter()
        for q in questions:
            hits = fill(q["question"], K, route=route)
            found = sum(relevant(q, h.fact.id) for h in hits)
            scores.setdefault(q["kind"], []).append((found / min(K, wanted(q)) if wanted(q) else 0.0, found > 0))
        per_question_ms = (time.perf_counter() - started) * 1000 / len(questions)
        return scores, per_question_ms

    def row(label, scores, ms):
        cells = []
        every = [s for kind in scores.values() for s in kind]
        for values in [*(scores[k] for k in ("reason", "symptom", "lot")), every]:
            cells.append(f"{sum(r for r, _ in values) / len(values):.3f}")
        hit = sum(h for _, h in every) / len(every)
        print(f"| {label} | {' | '.join(cells)} | {hit:.3f} | {ms:.0f} |")

    print("| route | reason | symptom | lot | all | any relevant in 8 | ms/question |")
    print("|---|---|---|---|---|---|---|")
    for route in ROUTES:
        row(route + (" (all embedded)" if route == "backfill" else ""), *measure(route))
    # The other end, nothing embedded yet: vectors taken away in a transaction that is rolled back (the
    # trigger that refuses it is set aside inside the same transaction).
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("ALTER TABLE memory_fact DISABLE TRIGGER fact_content_is_never_updated")
        cursor.execute("UPDATE memory_fact SET embedding = NULL")
        row("backfill (none embedded)", *measure("backfill"))
        transaction.set_rollback(True)


if __name__ == "__main__":
    main()
