"""Ingestion throughput: a first load to believed facts, the embedding backlog it leaves (memory.vectors,
which runs after it: facts are believed before their vectors land) and a no-op re-ingest of the full newer
openFDA snapshot, beside the embedding engine's own texts/s measured in the same run (the backlog's ceiling).

    .venv/bin/python bench/ingest.py                        # local MiniLM (ONNX Runtime when installed), 3 runs
    .venv/bin/python bench/ingest.py --engine torch         # the same model on torch (the fallback)
    .venv/bin/python bench/ingest.py --embeddings hashing   # lexical test embeddings (no model cost)
    .venv/bin/python bench/ingest.py --limit 500 --runs 1   # quicker: the first 500 records once
    .venv/bin/python bench/ingest.py --file tests/fixtures/openfda/drug-enforcement-2021-04-28.json.zip
                                                            # the 12,504-record bulk file
    .venv/bin/python bench/ingest.py --engine-sample 0      # engine alone on every text the run embedded

Runs against its own database on the embedded PostgreSQL (UNSAY_DB_NAME, default bench_recalls),
which it empties before each run. Per run it prints records/s for both ingest passes with facts written and
the process's CPU seconds; for the embedding backlog, facts/s, distinct texts/s and the records/s it
amounts to, with the time spent inside the model; and then "engine alone": up to --engine-sample of the
very texts that run embedded, embedded again straight through the provider in batches of the ingest's
size, as texts/s and as texts per CPU-second (the figure a shared machine's other load disturbs least),
beside which the backlog's texts/s is the share of the engine the stage uses. The last lines give
min / median / max over the runs.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embeddings", choices=["local", "hashing"], default="local")
    parser.add_argument("--engine", choices=["auto", "onnx", "torch"], default="auto",
                        help="UNSAY_LOCAL_EMBEDDING_ENGINE for --embeddings local")
    newer = ROOT / "tests/fixtures/openfda/drug-enforcement-2023-08-05-part.json.zip"
    parser.add_argument("--file", default=str(newer))
    parser.add_argument("--limit", type=int, default=0, help="Only the first N records (0 = all).")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--engine-sample", type=int, default=1000,
                        help="texts re-embedded for 'engine alone' (0 = every text the run embedded)")
    parser.add_argument("--db", default=os.environ.get("UNSAY_DB_NAME", "bench_recalls"))
    args = parser.parse_args()
    if not args.db.startswith("bench_"):
        parser.error("--db must start with bench_ (the benchmark empties it)")

    os.environ["UNSAY_DB_NAME"] = args.db
    os.environ["UNSAY_PROFILE"] = "test"  # embedded database and the hashing option; the provider is chosen below
    os.environ["UNSAY_EMBEDDINGS"] = args.embeddings
    os.environ["UNSAY_LOCAL_EMBEDDING_ENGINE"] = args.engine
    os.environ["UNSAY_EMBEDDING_DIM"] = "384"
    os.environ["UNSAY_EMBED_ON_COMMIT"] = "0"  # the backlog is embedded after the load, timed on its own
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from memory.embeddings import get_provider
    from memory.models import Fact
    from memory.vectors import embed_backlog
    from recalls.documents import load_document
    from recalls.services import CHUNK, ingest_document

    call_command("migrate", verbosity=0)
    document = load_document(args.file)
    if args.limit:
        document["results"] = document["results"][: args.limit]
    records = len(document["results"])
    provider = get_provider()
    provider.embed(["warm-up: load the model before timing"])  # loading the model is not ingestion
    engine = getattr(provider, "engine", "") or provider.name
    print(f"source: {args.file} ({records} records); embeddings: {provider.name} on {engine}; "
          f"workers: {args.workers}; cpus: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f} at start")

    # Record what the model is asked to embed, to re-embed the same texts for "engine alone".
    sent = []
    original = provider._embed
    provider._embed = lambda texts: (sent.extend(texts), original(texts))[1]

    figures = {"first": [], "backlog": [], "backlog_texts": [], "noop": [], "engine": [], "ratio": []}
    for n in range(1, args.runs + 1):
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE memory_fact, recalls_recallrecord, recalls_quarantinedrecord, "
                           "recalls_ingestrun RESTART IDENTITY CASCADE")
        sent.clear()
        print(f"\nrun {n}")
        rates = {}
        for label in ("first load", "embedding backlog", "no-op re-ingest"):
            seconds_before, load = provider.seconds, os.getloadavg()[0]
            cpu_started, started = time.process_time(), time.perf_counter()
            if label == "embedding backlog":
                report = embed_backlog()
                elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
                rates[label] = report.facts / elapsed
                figures["backlog_texts"].append(report.texts / elapsed)
                print(f"  {label:17s} {report.facts / elapsed:8.1f} facts/s  {report.texts / elapsed:6.1f} texts/s  "
                      f"= {records / elapsed:6.1f} records/s  {elapsed:7.1f}s  facts {report.facts:6d}  "
                      f"texts {report.texts:6d}  calls {report.calls:4d}  in the model "
                      f"{provider.seconds - seconds_before:6.1f}s  CPU {cpu:6.1f}s  load {load:.1f}")
                continue
            run = ingest_document(document, source_ref=args.file, trigger="bench", workers=args.workers)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            rates[label] = records / elapsed
            print(f"  {label:17s} {records / elapsed:8.1f} records/s  {elapsed:7.1f}s  facts {run.new_facts:6d}  "
                  f"versions {run.new_versions:5d}  unchanged {run.unchanged:5d}  quarantined {run.quarantined:3d}  "
                  f"embedding calls {run.embedding_calls:4d}  this process's CPU {cpu:6.1f}s  load {load:.1f}")
        texts_per_record = len(sent) / records
        sample = (list(sent) if args.engine_sample <= 0
                  else sent[:: max(1, len(sent) // args.engine_sample)][: args.engine_sample])
        cpu_started, started = time.process_time(), time.perf_counter()
        for i in range(0, len(sample), CHUNK):
            original(sample[i:i + CHUNK])
        engine_rate = len(sample) / (time.perf_counter() - started) if sample else float("nan")
        # On a shared machine wall-clock rates follow the neighbours' load; CPU seconds per text much less so.
        engine_cpu = len(sample) / (time.process_time() - cpu_started) if sample else float("nan")
        ratio = figures["backlog_texts"][-1] / engine_rate if sample else float("nan")
        print(f"  engine alone      {engine_rate:8.1f} texts/s ({engine_cpu:.1f} per CPU-second) over {len(sample)} "
              f"of this run's texts; load average {os.getloadavg()[0]:.1f}; {texts_per_record:.2f} texts per "
              f"record; the backlog's texts/s = {ratio:.2f} of the engine alone")
        figures["first"].append(rates["first load"])
        figures["backlog"].append(rates["embedding backlog"])
        figures["noop"].append(rates["no-op re-ingest"])
        figures["engine"].append(engine_rate)
        figures["ratio"].append(ratio)
    print(f"\nbelieved facts: {Fact.objects.believed().count()}; load average {os.getloadavg()[0]:.1f} at end")
    print(f"\nover {args.runs} runs: min / median / max")
    for key, label, unit in (("first", "first load", "records/s"), ("backlog", "embedding backlog", "facts/s"),
                             ("backlog_texts", "embedding backlog", "texts/s"),
                             ("noop", "no-op re-ingest", "records/s"), ("engine", "engine alone", "texts/s"),
                             ("ratio", "backlog / engine alone", "")):
        values = figures[key]
        print(f"  {label:28s} {min(values):8.2f} / {statistics.median(values):8.2f} / {max(values):8.2f} {unit}")


if __name__ == "__main__":
    main()
