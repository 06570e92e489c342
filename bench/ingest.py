"""Ingestion throughput: a first load and a no-op re-ingest of the full newer openFDA snapshot.

    .venv/bin/python bench/ingest.py                        # local MiniLM embeddings (the real model)
    .venv/bin/python bench/ingest.py --embeddings hashing   # lexical test embeddings (no model cost)
    .venv/bin/python bench/ingest.py --limit 500            # quicker: the first 500 records
    .venv/bin/python bench/ingest.py --file tests/fixtures/openfda/drug-enforcement-2021-04-28.json.zip

Runs against its own database on the embedded PostgreSQL (UNSAY_DB_NAME, default bench_recalls),
which it empties first. Prints records/s for both passes, facts written, embedding calls and texts,
and the embedding provider.
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embeddings", choices=["local", "hashing"], default="local")
    newer = ROOT / "tests/fixtures/openfda/drug-enforcement-2023-08-05-part.json.zip"
    parser.add_argument("--file", default=str(newer))
    parser.add_argument("--limit", type=int, default=0, help="Only the first N records (0 = all).")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--db", default=os.environ.get("UNSAY_DB_NAME", "bench_recalls"))
    args = parser.parse_args()
    if not args.db.startswith("bench_"):
        parser.error("--db must start with bench_ (the benchmark empties it)")

    os.environ["UNSAY_DB_NAME"] = args.db
    os.environ["UNSAY_PROFILE"] = "test"  # embedded database and the hashing option; the provider is chosen below
    os.environ["UNSAY_EMBEDDINGS"] = args.embeddings
    os.environ["UNSAY_EMBEDDING_DIM"] = "384"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from memory.embeddings import get_provider
    from memory.models import Fact
    from recalls.services import ingest_document, load_document

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE memory_fact, recalls_recallrecord, recalls_quarantinedrecord, recalls_ingestrun "
                       "RESTART IDENTITY CASCADE")
    document = load_document(args.file)
    if args.limit:
        document["results"] = document["results"][: args.limit]
    records = len(document["results"])
    provider = get_provider()
    if args.embeddings == "local":
        provider.embed(["warm-up: load the model before timing"])  # loading the model is not ingestion
    print(f"source: {args.file} ({records} records); embeddings: {provider.name}; workers: {args.workers}; "
          f"cpus: {os.cpu_count()}")

    for label in ("first load", "no-op re-ingest"):
        texts_before = provider.texts
        started = time.perf_counter()
        run = ingest_document(document, source_ref=args.file, trigger="bench", workers=args.workers)
        elapsed = time.perf_counter() - started
        print(f"{label:16s} {records / elapsed:8.1f} records/s  {elapsed:7.1f}s  new facts {run.new_facts:6d}  "
              f"new versions {run.new_versions:5d}  unchanged {run.unchanged:5d}  quarantined {run.quarantined:3d}  "
              f"embedding calls {run.embedding_calls:4d}  texts embedded {provider.texts - texts_before:6d}")
    print(f"believed facts: {Fact.objects.believed().count()}")


if __name__ == "__main__":
    main()
