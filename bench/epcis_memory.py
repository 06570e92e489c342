"""Memory of EPCIS receipt: peak RSS of `manage.py receive_epcis` on a document at the size limit.

    .venv/bin/python bench/epcis_memory.py [--formats json xml] [--mb 255]

Own database (UNSAY_DB_NAME, default unsay_bench_epcis_memory). SYNTHETIC shipments around the REAL recall
D-0502-2019 (losartan 50 mg, NDC 13668-409-30, lot 4L67C035): receiving ObjectEvents of one unit each (lot and
expiry in ILMD, an eventID each, master data naming the NDC), written to a temporary file until it reaches
`--mb` MB (just under shelf.epcis.MAX_DOCUMENT_BYTES, 256 MiB), in EPCIS 2.0 JSON and EPCIS 1.2 XML.
Three shapes (`--shapes`): `unit`, events of one unit each (the most events); `case`, commissioning events of
1,000 units each, lot and expiry in ILMD (the most units, every one of them noted for later events); `one`, a
single event naming units until the document is full (the largest event, refused whole as over the limit of
one event).

Each receipt runs in its own process (`manage.py receive_epcis FILE --site S --no-progress`, the command an
operator runs for files over the API's 20 MB); its peak resident set size comes from the kernel (wait4's
ru_maxrss). Same-run reference: the same command on a 3-event shipment (the process's own weight: Django,
the apps, the database driver). Target: under 300 MB for a document at the limit.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, describe_machine, setup_django  # noqa: E402

setup_django(db_name="unsay_bench_epcis_memory")

from drugs.gs1 import gtin_for_ndc, sgtin_uri  # noqa: E402
from shelf.epcis import MAX_DOCUMENT_BYTES  # noqa: E402
from shelf.models import Aggregation, ReceivedEvent, ShelfEvent, Unit  # noqa: E402
from tests import epcis_docs  # noqa: E402

NDC, LOT = "13668-409-30", "4L67C035"
GTIN = gtin_for_ndc(NDC)
TARGET_MB = 300


UNITS_PER_EVENT = {"unit": 1, "case": 1000}


def _units(run: str, i: int, per_event: int) -> list[str]:
    return [sgtin_uri(GTIN, f"{run}{i * per_event + k:09d}") for k in range(per_event)]


def _json_event(run: str, i: int, per_event: int) -> str:
    return json.dumps({
        "type": "ObjectEvent", "eventTime": "2026-12-01T09:00:00.000Z", "eventTimeZoneOffset": "+00:00",
        "eventID": f"urn:uuid:{run}-{i}", "epcList": _units(run, i, per_event), "action": "ADD",
        "bizStep": "receiving" if per_event == 1 else "commissioning",
        "bizLocation": {"id": "urn:epc:id:sgln:0614141.00001.0"},
        "ilmd": {"cbvmda:lotNumber": LOT if i % 1000 == 0 else f"SYN{i % 500:04d}",
                 "cbvmda:itemExpirationDate": "2028-10-31"}})


def _xml_event(run: str, i: int, per_event: int) -> str:
    lot = LOT if i % 1000 == 0 else f"SYN{i % 500:04d}"
    return epcis_docs.xml_object_event(_units(run, i, per_event), "receiving" if per_event == 1 else "commissioning",
                                       lot=lot, expiry="2028-10-31", event_id=f"urn:uuid:{run}-{i}")


def write_one_event(path: Path, form: str, size: int, run: str) -> int:
    """One event naming units until the file is `size` bytes; the number of units."""
    if form == "json":
        whole = epcis_docs.json_document([json.loads(_json_event(run, 0, 1))], master=True).decode()
        unit = json.dumps(_units(run, 0, 1)[0])
        cut = whole.index(unit) + len(unit)
        opening, closing, separator = whole[:cut], whole[cut:], ", "
    else:
        whole = epcis_docs.xml_document([_xml_event(run, 0, 1)], master=True).decode()
        unit = f"<epc>{_units(run, 0, 1)[0]}</epc>"
        cut = whole.index(unit) + len(unit)
        opening, closing, separator = whole[:cut], whole[cut:], ""
    written, n = 0, 1
    with path.open("w", encoding="utf-8") as out:
        written += out.write(opening)
        while True:
            uri = sgtin_uri(GTIN, f"{run}{n:09d}")
            text = separator + (json.dumps(uri) if form == "json" else f"<epc>{uri}</epc>")
            if written + len(text) + len(closing) > size:
                break
            written += out.write(text)
            n += 1
        out.write(closing)
    return n


def write_document(path: Path, form: str, size: int, run: str, shape: str = "unit") -> int:
    """Events until the file is `size` bytes (the closing text included); the number of units."""
    if shape == "one":
        return write_one_event(path, form, size, run)
    per_event = UNITS_PER_EVENT[shape]
    if form == "json":
        head = epcis_docs.json_document([], master=True).decode()
        cut = head.index('"eventList": [') + len('"eventList": [')
        opening, closing, event, separator = head[:cut], head[cut:], _json_event, ", "
    else:
        head = epcis_docs.xml_document([], master=True).decode()
        cut = head.index("<EventList>") + len("<EventList>")
        opening, closing, event, separator = head[:cut], head[cut:], _xml_event, ""
    written, n = 0, 0
    with path.open("w", encoding="utf-8") as out:
        written += out.write(opening)
        while True:
            text = (separator if n and separator else "") + event(run, n, per_event)
            if written + len(text) + len(closing) > size:
                break
            written += out.write(text)
            n += 1
        out.write(closing)
    return n * per_event


def peak_rss(path: Path, site: str) -> tuple[float, float, str]:
    """(peak RSS in MB, seconds, the command's summary line) of one receive_epcis process."""
    began = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen([sys.executable, str(PROJECT_DIR / "manage.py"), "receive_epcis", str(path),
                                    "--site", site, "--no-progress"], cwd=PROJECT_DIR, env=os.environ.copy(),
                                   stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)  # the kernel's peak RSS of that process (KiB)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - began
        out.seek(0)
        err.seek(0)
        if process.returncode:
            raise SystemExit(f"receive_epcis failed: {err.read().decode()[-2000:]}")
        return usage.ru_maxrss / 1024, seconds, out.read().decode().strip().splitlines()[0]


def clean() -> None:
    for model in (ReceivedEvent, Unit, Aggregation, ShelfEvent):
        model.objects.filter(site__startswith="bench-mem-").delete()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--formats", nargs="+", default=["json", "xml"], choices=["json", "xml"])
    parser.add_argument("--shapes", nargs="+", default=["unit", "case", "one"], choices=["unit", "case", "one"])
    parser.add_argument("--mb", type=float, default=MAX_DOCUMENT_BYTES / 1e6 - 0.5,
                        help="document size in MB (10^6 bytes); default just under the 256 MiB limit")
    args = parser.parse_args()
    print(describe_machine())
    clean()
    run = f"M{int(time.time()) % 10**8}"  # serials are run + form + 9 digits: 19 characters, under GS1's 20
    with tempfile.TemporaryDirectory(prefix="epcis-memory-") as tmp:
        small = Path(tmp) / "small.xml"
        small.write_bytes(epcis_docs.shipment_xml(epcis_docs.serials(run, 3)))
        reference, _, _ = peak_rss(small, f"bench-mem-{run}-ref")
        print(f"reference, same run: receive_epcis on a 3-event shipment: peak RSS {reference:.0f} MB")
        for shape in args.shapes:
            for form in args.formats:
                path = Path(tmp) / f"at-limit.{form}"
                tag = f"{run[1:]}{shape[0]}{form[0]}"  # serials: tag + 9 digits, within GS1's 20 characters
                units = write_document(path, form, int(args.mb * 1e6), tag, shape)
                size = path.stat().st_size
                rss, seconds, summary = peak_rss(path, f"bench-mem-{tag}")
                print(f"{shape} {form}: {size / 1e6:.1f} MB ({size / MAX_DOCUMENT_BYTES:.1%} of the limit), "
                      f"{units:,} units: peak RSS {rss:.0f} MB ({rss - reference:+.0f} MB over the reference; "
                      f"target < {TARGET_MB} MB) in {seconds:.0f} s = {units / seconds:,.0f} units/s")
                print(f"  {summary}")
                path.unlink()
    clean()


if __name__ == "__main__":
    main()
