"""The openFDA documents an ingestion run reads: an API response or a bulk download (.json.zip), from a
path or an s3:// URL, bounded in size, and the snapshot date that orders one against another."""

import io
import json
import zipfile
import zlib
from datetime import date

from django.conf import settings

from . import archive


class SourceError(ValueError):
    """The input as a whole is unusable (not JSON, no results list...)."""


def _read_bounded(stream, limit: int, location) -> bytes:
    """Read at most `limit` bytes; more is a SourceError. The zip's own size field can lie (a zip
    bomb), so the bytes actually inflated are what is counted."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise SourceError(f"{location}: more than {limit:,} bytes of JSON (UNSAY_INGEST_MAX_BYTES); refusing "
                          f"to read it into memory")
    return data


def load_document(location: str) -> dict:
    """An API response JSON or a bulk download (.json.zip), from a path or s3:// URL."""
    limit = settings.UNSAY_INGEST_MAX_BYTES
    try:
        data = archive.read_location(str(location))
    except FileNotFoundError:
        raise SourceError(f"{location}: no such file") from None
    if str(location).endswith(".zip") or data[:2] == b"PK":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                names = [n for n in zf.namelist() if n.endswith(".json")]
                if len(names) != 1:
                    raise SourceError(f"{location}: expected one .json inside the zip, found {len(names)}")
                if zf.getinfo(names[0]).file_size > limit:
                    raise SourceError(f"{location}: {names[0]} says it inflates to "
                                      f"{zf.getinfo(names[0]).file_size:,} bytes, more than {limit:,} "
                                      f"(UNSAY_INGEST_MAX_BYTES)")
                with zf.open(names[0]) as member:
                    data = _read_bounded(member, limit, location)
        except (zipfile.BadZipFile, zlib.error) as exc:
            raise SourceError(f"{location}: not a readable zip ({exc})") from None
    elif len(data) > limit:
        raise SourceError(f"{location}: {len(data):,} bytes, more than {limit:,} (UNSAY_INGEST_MAX_BYTES)")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise SourceError(f"{location}: not JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise SourceError(f"{location}: expected an openFDA document with a 'results' list")
    return document


def snapshot_date(document: dict) -> date | None:
    """openFDA's meta.last_updated ("2021-04-28"), the ordering key of a whole snapshot; None when absent."""
    meta = document.get("meta") if isinstance(document, dict) else None
    value = meta.get("last_updated") if isinstance(meta, dict) else None
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value.strip()[:10])
    except ValueError:
        return None
