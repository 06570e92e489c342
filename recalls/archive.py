"""Raw snapshots of everything fetched from openFDA, kept so any run can be replayed.

To S3 (boto3) when UNSAY_S3_BUCKET is set, else under UNSAY_SNAPSHOT_DIR. A snapshot is the
API-shaped JSON document ({"meta", "results"}) exactly as the client assembled it from the pages,
so `manage.py ingest_recalls --file <location>` re-ingests it (s3://bucket/key works too).
"""

import json
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from core import aws


def s3_client():
    return aws.client("s3")


def set_s3_client(client):
    """Swap the S3 client (tests use a botocore Stubber on it); None goes back to the real one."""
    aws.use_client("s3", client)


def snapshot_name(kind: str, label: str, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)[:80]
    return f"openfda/{kind}/{now:%Y/%m/%d}/{now:%Y%m%dT%H%M%S%fZ}-{safe}.json"


def archive_snapshot(document: dict, *, kind: str, label: str) -> str:
    """Store the document; returns its location (s3://bucket/key or a file path)."""
    body = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    key = snapshot_name(kind, label)
    bucket = settings.UNSAY_S3_BUCKET
    if bucket:
        s3_client().put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")
        return f"s3://{bucket}/{key}"
    path = Path(settings.UNSAY_SNAPSHOT_DIR) / key
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    tmp.write_bytes(body)
    tmp.replace(path)  # never leave a half-written snapshot under the final name
    return str(path)


def read_location(location: str) -> bytes:
    """Bytes of a snapshot: an s3:// URL or a local path."""
    if location.startswith("s3://"):
        bucket, _, key = location[5:].partition("/")
        if not bucket or not key:
            raise ValueError(f"{location!r} is not an s3://bucket/key location.")
        return s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()
    return Path(location).read_bytes()
