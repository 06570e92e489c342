"""The demo slice: real, unmodified openFDA recall records (demo/data/demo-slice.json, built by
`manage.py make_demo_slice --snapshots tests/fixtures/openfda`), ingested like any file."""

from pathlib import Path

from recalls.models import IngestRun
from recalls.services import ingest_file

DEMO_SLICE = Path(__file__).resolve().parent / "data" / "demo-slice.json"


def ingest_demo(*, trigger="command", progress=None, workers=1) -> IngestRun:
    return ingest_file(DEMO_SLICE, trigger=trigger, progress=progress, workers=workers)
