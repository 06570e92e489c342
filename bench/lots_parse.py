"""How long parse_scope takes on the longest real code_info and on a 3,000-lot record.

The 3,000-lot text is built from the real D-1396-2016 entries ("Service Code …, Lot Number …,
Exp. Date …;") repeated with a running suffix so every lot is distinct: synthetic in its length only.
Prints min/median/max of 7 runs in CPU time (time.process_time: the machine is shared, so wall time
mostly measures the other processes; wall min is printed too), with the old extractor
(git show 209b04a:recalls/lots.py) as the same-run reference when it can be loaded.

    .venv/bin/python bench/lots_parse.py
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time
import types
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from recalls.lots.parse import parse_scope  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "openfda" / "drug-enforcement-2023-08-05-part.json.zip"


def longest_real():
    with zipfile.ZipFile(FIXTURE) as archive:
        records = [r for name in archive.namelist() for r in json.load(archive.open(name))["results"]]
    return max(records, key=lambda r: len(r.get("code_info") or "") + len(r.get("more_code_info") or ""))


def three_thousand_lots(record):
    entries = re.findall(r"Service Code \w+ , Lot Number \w+ , Exp\. Date [\d/]+ ;", record["code_info"])
    out = []
    for n in range(3000):
        entry = entries[n % len(entries)]
        out.append(re.sub(r"(Lot Number \w+)", rf"\g<1>{n:04d}", entry))
    return "  ".join(out)


def old_extractor():
    try:
        source = subprocess.run(["git", "-C", str(ROOT), "show", "209b04a:recalls/lots.py"], check=True,
                                capture_output=True, text=True).stdout
    except Exception:
        return None
    module = types.ModuleType("old_lots")
    module.__dict__["__name__"] = "old_lots"
    # The old module imported its lot tidier from a module since folded into drugs.lots (printed_lot).
    source = source.replace("from .normalize import normalize_lot",
                            "from drugs.lots import printed_lot as normalize_lot")
    exec(compile(source, "old_lots", "exec"), module.__dict__)
    return module.extract_lots


def timed(fn, *args, runs=7):
    times, walls = [], []
    for _ in range(runs):
        start, wall = time.process_time(), time.perf_counter()
        result = fn(*args)
        times.append(time.process_time() - start)
        walls.append(time.perf_counter() - wall)
    return result, (times, walls)


def line(label, measured):
    times, walls = measured
    return f"{label:<48} CPU min {min(times) * 1000:7.1f} ms  median {statistics.median(times) * 1000:7.1f} ms  " \
           f"max {max(times) * 1000:7.1f} ms  (wall min {min(walls) * 1000:7.1f} ms)"


def main():
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    record = longest_real()
    big = three_thousand_lots(record)
    old = old_extractor()
    scope, times = timed(parse_scope, record["code_info"], record.get("more_code_info") or "")
    print(line(f"real {record['recall_number']} ({len(scope.lots)} lots)", times))
    scope, times = timed(parse_scope, big)
    print(line(f"3,000-lot text ({len(big):,} chars, {len(scope.lots)} lots)", times))
    if old:
        lots, times = timed(old, big)
        print(line(f"reference: old extract_lots, same text ({len(lots)})", times))


if __name__ == "__main__":
    main()
