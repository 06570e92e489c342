"""Why the ONNX MiniLM session's idle threads sleep (memory/minilm.py, session.intra_op.allow_spinning=0):
texts/s of the model with its intra-op threads spinning and sleeping, alone and beside busy processes
that stand in for the database and the ingest's other threads, and how much work those get done.

    .venv/bin/python bench/onnx_spinning.py [--texts 600] [--rounds 2] [--busy 0,1]

Texts: distinct product_description + reason_for_recall of the real 2023 openFDA part. Each round
alternates spinning on / off, so both see the same minutes of the shared machine. Prints texts/s and
the busy processes' loops/s per setting, then min / median / max per setting.
"""

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, setup_django  # noqa: E402

FIXTURE = PROJECT_DIR / "tests" / "fixtures" / "openfda" / "drug-enforcement-2023-08-05-part.json.zip"


def busy(results, stop):
    loops = 0
    while not stop.is_set():
        sum(i * i for i in range(10_000))
        loops += 1
    results.put(loops)


def measure(engine, texts, *, spinning: bool, busy_processes: int, path) -> tuple[float, float]:
    engine.session = engine.new_session(path, spinning=spinning)  # the product's session, but for spinning
    engine.encode(texts[:32])  # warm
    context = multiprocessing.get_context("fork")
    stop, results = context.Event(), context.Queue()
    others = [context.Process(target=busy, args=(results, stop)) for _ in range(busy_processes)]
    for process in others:
        process.start()
    started = time.perf_counter()
    for at in range(0, len(texts), 200):  # the ingest's chunk of texts per call
        engine.encode(texts[at:at + 200])
    seconds = time.perf_counter() - started
    stop.set()
    loops = sum(results.get() for _ in others)
    for process in others:
        process.join()
    return len(texts) / seconds, loops / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--busy", default="0,1", help="comma-separated counts of busy processes beside the model")
    args = parser.parse_args()
    setup_django(db_name="unsay_bench", migrate=False)
    from django.conf import settings

    from memory import minilm

    with zipfile.ZipFile(FIXTURE) as archive:
        records = json.loads(archive.read(archive.namelist()[0]))["results"]
    texts = list(dict.fromkeys(f"{r.get('product_description', '')} {r.get('reason_for_recall', '')}"
                               for r in records))[:args.texts]
    path = minilm.ensure_onnx_model(settings.UNSAY_MODEL_DIR)
    engine = minilm.OnnxMiniLM(path)
    print(f"# {os.cpu_count()} CPU cores, Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}; "
          f"{len(texts)} real texts; onnxruntime, batches of {engine.batch_size}")
    figures: dict = {}
    for count in [int(n) for n in args.busy.split(",")]:
        for round_no in range(1, args.rounds + 1):
            for spinning in (True, False):
                rate, loops = measure(engine, texts, spinning=spinning, busy_processes=count, path=path)
                figures.setdefault((count, spinning), []).append((rate, loops))
                print(f"round {round_no}  busy processes {count}  spinning {'on ' if spinning else 'off'}"
                      f"  {rate:6.1f} texts/s  busy loops/s {loops:7.0f}", flush=True)
    print("\nmin / median / max")
    for (count, spinning), values in figures.items():
        rates, loops = sorted(v[0] for v in values), sorted(v[1] for v in values)
        print(f"busy {count}  spinning {'on ' if spinning else 'off'}  texts/s {rates[0]:.1f} / "
              f"{statistics.median(rates):.1f} / {rates[-1]:.1f}  busy loops/s {loops[0]:.0f} / "
              f"{statistics.median(loops):.0f} / {loops[-1]:.0f}")


if __name__ == "__main__":
    main()
