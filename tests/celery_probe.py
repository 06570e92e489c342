"""A Celery app for tests/corrections/test_celery_delivery.py: Unsay's own app and configuration (late acks,
reject on worker lost, time limits, visibility timeout) plus one probe task that records each
delivery in a file and sleeps, so a test can kill the worker while it runs."""

import os
import time
from pathlib import Path

from unsay_site.celery import app


@app.task(name="tests.probe_sleep")
def probe_sleep(journal: str, seconds: float) -> None:
    path = Path(journal)
    with path.open("a") as out:
        out.write(f"start {os.getpid()}\n")
    time.sleep(seconds)
    with path.open("a") as out:
        out.write(f"done {os.getpid()}\n")
