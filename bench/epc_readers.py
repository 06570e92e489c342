"""EPC URNs read by epcpy (drugs.gs1) against the regex reader it replaced, on the shelf bench's shipment.

    .venv/bin/python bench/epc_readers.py [--events 50000] [--rounds 6]

The replaced reader is read from git (commit 3fe1c69, shelf/epc.py) and swapped in for drugs.gs1's URN reading,
so both run in one process on the same document, alternating: CPU seconds per URN (the SGTINs of the shipment)
and shelf.epcis.parse_document (every EPC read through drugs.gs1.epc_refusal), in CPU time (process_time), which
holds better than wall time on a shared, loaded machine; and shelf.receiving.receive of a fresh shipment each
(wall time, the database included; bench/shelf.py's database, unsay_bench_shelf).
"""

import argparse
import functools
import importlib.util
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, describe_machine, setup_django  # noqa: E402

setup_django(db_name="unsay_bench_shelf")

from drugs import gs1  # noqa: E402
from shelf.epcis import parse_document  # noqa: E402
from shelf.receiving import receive  # noqa: E402

REPLACED = "3fe1c69"


def replaced_reader():
    source = subprocess.run(["git", "-C", str(PROJECT_DIR), "show", f"{REPLACED}:shelf/epc.py"], check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType("replaced_epc")
    exec(compile(source, "replaced_epc", "exec"), module.__dict__)
    return module._read_sgtin.__wrapped__


def shipment_builder():
    """bench/shelf.py's shipment(n, run) (loaded by path: its module name is the shelf app's)."""
    spec = importlib.util.spec_from_file_location("bench_shelf", Path(__file__).parent / "shelf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.shipment


def use(reader):
    gs1._read_sgtin = functools.lru_cache(maxsize=1 << 13)(reader)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    print(describe_machine())
    readers = {"epcpy": gs1._read_sgtin.__wrapped__, "replaced": replaced_reader()}
    shipment = shipment_builder()
    data = shipment(args.events, "P1")
    uris = [f"urn:epc:id:sgtin:0313668.040930.P1{i:09d}" for i in range(args.events)]
    assert all(readers["epcpy"](u) == readers["replaced"](u) for u in uris), "the readers disagree"
    per_uri, parsing, receiving = ({name: [] for name in readers} for _ in range(3))
    stamp = int(time.time()) % 100_000
    for round_no in range(args.rounds):
        for name in (list(readers) if round_no % 2 == 0 else list(reversed(readers))):
            began = time.process_time()
            for uri in uris:
                readers[name](uri)
            per_uri[name].append((time.process_time() - began) / len(uris) * 1e6)
            use(readers[name])
            began = time.process_time()
            parse_document(data)
            parsing[name].append(args.events / (time.process_time() - began))
            run = f"{name[0]}{round_no}{stamp}"  # a serial of at most 20 characters
            fresh = shipment(args.events, run)
            began = time.perf_counter()
            receipt = receive(fresh, site=f"epc-{run}", source="bench")
            receiving[name].append(args.events / (time.perf_counter() - began))
            assert receipt.applied == args.events and not receipt.refused, receipt.as_dict()
    use(readers["epcpy"])
    for name in readers:
        print(f"{name:9s} CPU per URN: min {min(per_uri[name]):.2f} median {statistics.median(per_uri[name]):.2f} "
              f"max {max(per_uri[name]):.2f} us; parse_document {args.events:,} events: min {min(parsing[name]):,.0f} "
              f"median {statistics.median(parsing[name]):,.0f} max {max(parsing[name]):,.0f} events/s (CPU); "
              f"receive: min {min(receiving[name]):,.0f} median {statistics.median(receiving[name]):,.0f} "
              f"max {max(receiving[name]):,.0f} events/s (wall)")
    uri_ratio = statistics.median(per_uri["epcpy"]) / statistics.median(per_uri["replaced"])
    parse_ratio = statistics.median(parsing["replaced"]) / statistics.median(parsing["epcpy"])
    receive_ratio = statistics.median(receiving["replaced"]) / statistics.median(receiving["epcpy"])
    print(f"epcpy / replaced: {uri_ratio:.1f}x the CPU per URN, {parse_ratio:.2f}x for parse_document; "
          f"{receive_ratio:.2f}x the time to receive")


if __name__ == "__main__":
    main()
