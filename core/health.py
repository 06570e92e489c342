"""What the staff status page (/status) and `manage.py status` report, and the public liveness
answer of /health.

/health is public and hit by load balancers and probes, so it must never cost more than the app can
give: it answers only {"status": "up"|"down"} from a liveness check (one `SELECT 1` under a statement
timeout) that is cached for UNSAY_HEALTH_CACHE_SECONDS and refreshed by one thread at a time; every
other request in that window reads the cached answer and touches neither the database nor Redis.
(Each request used to run a Celery broadcast ping, about 1.1 s, holding a database connection: 110
parallel probes exhausted PostgreSQL's connection slots.) The full report below (the code's version, the
engines' versions, counts, regions, workers, model usage, the Redis URL without its password) is for staff
only: a public version would tell a scanner which published fixes a deployment lacks.

The report is built from a list of section functions, each returning a dict merged into the
report. Apps add their own with `register_section(fn)` (a section that raises is reported under
"errors", never breaks the page) and their tables with `register_count(label, "app.Model")`.
Counts of tables that don't exist yet (an app not migrated, a model not written yet) are skipped.
"""

import logging
import threading
import time
from collections.abc import Callable
from urllib.parse import urlparse

import redis
from celery import current_app  # the project's app (unsay_site/__init__.py loads it)
from django.apps import apps
from django.conf import settings
from django.db import connection, transaction

from core.version import VERSION

log = logging.getLogger(__name__)

SECTIONS: list[Callable[[], dict]] = []
CELERY_PING_TIMEOUT = 1.0  # seconds to wait for workers to answer a ping
LIVENESS_STATEMENT_TIMEOUT_MS = 2000  # the liveness SELECT 1 gives up after this
FIRST_ANSWER_WAIT_SECONDS = 5.0  # with nothing cached yet, how long a request waits for the refreshing one

# label -> "app_label.ModelName" (or "app_label.ModelName:believed" for Fact's believed rows).
COUNTED_MODELS: dict[str, str] = {
    "users": "unsay_site.User",
    "facts": "memory.Fact",
    "facts_believed": "memory.Fact:believed",
    "decisions": "memory.Decision",
    "read_sets": "memory.ReadSet",
    "read_set_members": "memory.ReadSetMember",
    "patients": "patients.Patient",
    "dispensing_records": "patients.DispensingRecord",
    "recall_records": "recalls.RecallRecord",
    "ingest_runs": "recalls.IngestRun",
    "quarantined_records": "recalls.QuarantinedRecord",
    "sweep_runs": "corrections.SweepRun",
    "corrections": "corrections.Correction",
    "outbox_messages": "corrections.OutboxMessage",
}


def register_section(fn: Callable[[], dict]) -> Callable[[], dict]:
    """Add a section to the report (usable as a decorator). Registering twice is harmless."""
    if fn not in SECTIONS:
        SECTIONS.append(fn)
    return fn


def register_count(label: str, model_label: str) -> None:
    COUNTED_MODELS[label] = model_label


def health_report() -> dict:
    report: dict = {}
    for section in SECTIONS:
        try:
            report.update(section())
        except Exception as exc:  # report, don't crash: operators read this when things are broken
            log.warning("health section %s failed: %s", section.__name__, exc)
            report.setdefault("errors", {})[section.__name__] = str(exc)
    report["ok"] = bool(report.get("database", {}).get("ok"))
    return report


def _scalar(sql: str, params=None):
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        row = cursor.fetchone()
    return row[0] if row else None


def _rows(sql: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


@register_section
def version_section() -> dict:
    """The code's version (core.version), first in the report: what an operator compares with CHANGELOG.md."""
    return {"version": VERSION}


@register_section
def database_section() -> dict:
    section = {"engine": connection.vendor, "server_version": None,
               "database": {"ok": False, "name": connection.settings_dict.get("NAME"),
                            "embedded": getattr(settings, "EMBEDDED_DATABASE", False)}}
    try:
        if connection.vendor == "postgresql":
            section["server_version"] = _scalar("SHOW server_version")
        else:
            section["server_version"] = _scalar("SELECT version()")
        section["database"]["ok"] = True
    except Exception as exc:
        section["database"]["error"] = str(exc)
    return section


@register_section
def vector_section() -> dict:
    if connection.vendor == "postgresql":
        version = _scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        return {"vector": {"available": version is not None, "kind": "pgvector", "version": version}}
    if connection.vendor == "cockroachdb":
        # Vector indexes are on by default since v25.4 (feature.vector_index.enabled); reading the
        # cluster setting needs a privileged user, so a refusal is reported rather than guessed.
        try:
            enabled = _scalar("SHOW CLUSTER SETTING feature.vector_index.enabled")
            return {"vector": {"available": str(enabled).lower() in ("true", "t"), "kind": "cockroachdb vector index"}}
        except Exception as exc:
            return {"vector": {"available": None, "kind": "cockroachdb vector index", "error": str(exc)}}
    return {"vector": {"available": False}}


@register_section
def topology_section() -> dict:
    if connection.vendor != "cockroachdb":
        return {"topology": "single-node", "regions": [], "survival_goal": None}
    regions = _rows("SELECT region, \"primary\" FROM [SHOW REGIONS FROM DATABASE]")
    goal = _scalar("SELECT survival_goal FROM [SHOW SURVIVAL GOAL FROM DATABASE]") if regions else None
    nodes = _scalar("SELECT count(*) FROM crdb_internal.gossip_nodes WHERE is_live")
    return {
        "topology": "multi-region" if len(regions) > 1 else "single-region",
        "regions": [name for name, _ in regions],
        "primary_region": next((name for name, primary in regions if primary), None),
        "survival_goal": goal,
        "live_nodes": nodes,
    }


def _redacted(url: str) -> str:
    parsed = urlparse(url)
    if parsed.password:
        return url.replace(f":{parsed.password}@", ":***@")
    return url


@register_section
def redis_section() -> dict:
    url = settings.REDIS_URL
    if not url:
        return {"redis": {"ok": False, "url": None, "error": "REDIS_URL is not set (no broker: tasks run in-process)"}}

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        client.ping()
        return {"redis": {"ok": True, "url": _redacted(url), "version": client.info("server").get("redis_version")}}
    except Exception as exc:
        return {"redis": {"ok": False, "url": _redacted(url), "error": str(exc)}}


def _redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
    except redis.RedisError:
        return False


@register_section
def celery_section() -> dict:
    if not settings.REDIS_URL or settings.CELERY_TASK_ALWAYS_EAGER:
        return {"celery": {"workers": [], "note": "no broker: tasks run eagerly in-process"}}
    if not _redis_answers(settings.REDIS_URL):
        # Without this, Celery's control client would keep retrying the broker connection.
        return {"celery": {"workers": [], "error": "broker unreachable"}}
    # ping, not inspect().stats(): one broadcast, answered by every live worker within the timeout.
    replies = current_app.control.ping(timeout=CELERY_PING_TIMEOUT) or []
    return {"celery": {"workers": sorted(name for reply in replies for name in reply)}}


@register_section
def counts_section() -> dict:
    existing = set(connection.introspection.table_names())
    counts = {}
    for label, spec in COUNTED_MODELS.items():
        model_label, _, scope = spec.partition(":")
        try:
            model = apps.get_model(model_label)
        except LookupError:
            continue  # app or model not written yet
        if model._meta.db_table not in existing:
            continue  # not migrated yet
        queryset = model._default_manager.all()
        if scope:
            queryset = getattr(queryset, scope)()
        counts[label] = queryset.count()
    return {"counts": counts}


# --- the public liveness answer ---------------------------------------------------------------


def check_liveness() -> dict:
    """Up when the database answers a trivial query within the statement timeout. Redis and Celery
    are left out on purpose: the web app still serves (and tells staff) when they are down."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor in ("postgresql", "cockroachdb"):
                cursor.execute(f"SET LOCAL statement_timeout = {int(LIVENESS_STATEMENT_TIMEOUT_MS)}")
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return {"status": "up", "ok": True}
    except Exception as exc:
        log.warning("liveness check failed: %s", exc)
        return {"status": "down", "ok": False}


class CachedCheck:
    """compute() at most once per ttl seconds in this process, by one thread at a time: while one
    thread refreshes, the others answer the last value at once (and, before any value exists, wait
    a bounded time for the first one)."""

    def __init__(self, compute: Callable[[], dict], ttl: Callable[[], float], fallback: dict):
        self.compute, self.ttl, self.fallback = compute, ttl, fallback
        self.lock = threading.Lock()
        self.value: dict | None = None
        self.at = 0.0
        self.refreshes = 0

    def _fresh(self) -> bool:
        return self.value is not None and time.monotonic() - self.at < self.ttl()

    def get(self) -> dict:
        if self._fresh():
            return self.value
        got = (self.lock.acquire(blocking=False) if self.value is not None
               else self.lock.acquire(timeout=FIRST_ANSWER_WAIT_SECONDS))
        if got:
            try:
                if not self._fresh():
                    self.value = self.compute()
                    self.at = time.monotonic()
                    self.refreshes += 1
            finally:
                self.lock.release()
        return self.value if self.value is not None else dict(self.fallback)

    def reset(self) -> None:
        with self.lock:
            self.value, self.at = None, 0.0


def _cache_seconds() -> float:
    return float(getattr(settings, "UNSAY_HEALTH_CACHE_SECONDS", 5.0))


LIVENESS = CachedCheck(lambda: check_liveness(), _cache_seconds, {"status": "down", "ok": False})
# The staff report is cached too (a Celery ping and a dozen counts): a page left refreshing must not
# become the load it is meant to show.
REPORT = CachedCheck(lambda: health_report(), _cache_seconds, {"ok": False, "errors": {"report": "still running"}})


def liveness() -> dict:
    return dict(LIVENESS.get())


def cached_report() -> dict:
    return dict(REPORT.get())
