"""EPC URNs read by drugs.gs1 against epcpy (GS1's Tag Data Standard as a package), on the shelf bench's shipment.

    .venv/bin/pip install epcpy==0.1.8     # only for this comparison; not a requirement of the service
    .venv/bin/python bench/epc_readers.py [--events 20000] [--rounds 6]

Both readers run in one process on the same documents, alternating, epcpy swapped in for drugs.gs1's reading of
SGTIN URNs: CPU time per URN (the SGTINs of the shipment) and of shelf.epcis.parse_document (every EPC read
through drugs.gs1.epc_refusal), in process time, which holds better than wall time on a shared machine; and
shelf.receiving.receive of a fresh shipment each (wall time, the database included; bench/shelf.py's database,
unsay_bench_shelf). The readers must agree on every URN first.
"""

import argparse
import functools
import importlib.util
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import describe_machine, setup_django  # noqa: E402

setup_django(db_name="unsay_bench_shelf")

from drugs import gs1  # noqa: E402
from shelf.epcis import parse_document  # noqa: E402
from shelf.receiving import receive  # noqa: E402

OURS = gs1._read_sgtin.__wrapped__


def epcpy_reader():
    try:
        from epcpy.epc_schemes.sgtin import SGTIN
        from epcpy.utils.common import ConvertException
    except ImportError:
        sys.exit("epcpy is not installed: .venv/bin/pip install epcpy==0.1.8")

    def read(uri: str):
        if len(uri) > gs1.MAX_EPC_CHARS or not uri.startswith("urn:epc:id:sgtin:"):
            return OURS(uri)
        try:
            element = SGTIN(uri).gs1_element_string()  # "(01)<GTIN-14>(21)<serial, unescaped>"
        except ConvertException as exc:
            return None, str(exc)
        return (element[4:18], element[22:]), ""

    return read


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
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    print(describe_machine())
    readers = {"drugs.gs1": OURS, "epcpy": epcpy_reader()}
    shipment = shipment_builder()
    data = shipment(args.events, "P1")
    uris = [f"urn:epc:id:sgtin:0313668.040930.P1{i:09d}" for i in range(args.events)]
    assert all(readers["epcpy"](u) == OURS(u) for u in uris), "the readers disagree"
    per_uri, parsing, receiving = ({name: [] for name in readers} for _ in range(3))
    stamp = int(time.time()) % 100_000
    try:
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
                run = f"{name[0]}{round_no}{stamp}"  # serials of at most 20 characters
                fresh = shipment(args.events, run)
                began = time.perf_counter()
                receipt = receive(fresh, site=f"epc-{run}", source="bench")
                receiving[name].append(args.events / (time.perf_counter() - began))
                assert receipt.applied == args.events and not receipt.refused, receipt.as_dict()
    finally:
        use(OURS)
    for name in readers:
        print(f"{name:9s} CPU per URN: min {min(per_uri[name]):.2f} median {statistics.median(per_uri[name]):.2f} "
              f"max {max(per_uri[name]):.2f} us; parse_document {args.events:,} events: min {min(parsing[name]):,.0f} "
              f"median {statistics.median(parsing[name]):,.0f} max {max(parsing[name]):,.0f} events/s (CPU); "
              f"receive: min {min(receiving[name]):,.0f} median {statistics.median(receiving[name]):,.0f} "
              f"max {max(receiving[name]):,.0f} events/s (wall)")
    uri_ratio = statistics.median(per_uri["epcpy"]) / statistics.median(per_uri["drugs.gs1"])
    parse_ratio = statistics.median(parsing["drugs.gs1"]) / statistics.median(parsing["epcpy"])
    receive_ratio = statistics.median(receiving["drugs.gs1"]) / statistics.median(receiving["epcpy"])
    print(f"epcpy / drugs.gs1: {uri_ratio:.1f}x the CPU per URN, {parse_ratio:.2f}x for parse_document; "
          f"{receive_ratio:.2f}x the time to receive")


if __name__ == "__main__":
    main()
