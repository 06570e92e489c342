"""Test session setup: the test profile (hashing embeddings allowed, fast hasher) is set before
Django loads; the embedded PostgreSQL starts on the session's first database connection
(unsay_site.embedded_backend)."""

import os

os.environ.setdefault("UNSAY_PROFILE", "test")

import pytest  # noqa: E402


@pytest.fixture
def hashing_embeddings():
    """A fresh hashing provider whose call counter starts at zero."""
    from django.conf import settings

    from memory.embeddings import HashingEmbedding, reset_provider

    provider = HashingEmbedding(settings.UNSAY_EMBEDDING_DIM)
    reset_provider(provider)
    yield provider
    reset_provider(None)


def pytest_collection_modifyitems(config, items):
    """Tests marked `cockroach` need a real CockroachDB; without UNSAY_COCKROACH_URL they are skipped, saying so."""
    if os.environ.get("UNSAY_COCKROACH_URL"):
        return
    skip = pytest.mark.skip(reason="UNSAY_COCKROACH_URL is not set (e.g. cockroachdb://root@localhost:26257/defaultdb"
                                   "?sslmode=disable with `docker compose up`)")
    for item in items:
        if "cockroach" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """Tasks the tests queued on their own Redis database (db 15, see settings) have no worker:
    drop them so they do not pile up across runs."""
    from django.conf import settings

    url = getattr(settings, "REDIS_URL", None) or ""
    if settings.PROFILE != "test" or not url.endswith("/15"):
        return
    try:
        import redis

        redis.Redis.from_url(url, socket_timeout=1).flushdb()
    except Exception:  # Redis gone: nothing to clean
        pass


@pytest.fixture
def browser():
    """Headless Debian Chromium through chromedriver (tests/test_browser_*.py; they skip without it)."""
    import shutil

    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1100"):
        options.add_argument(arg)
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
