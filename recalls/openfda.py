"""openFDA HTTP client: the one seam between Unsay and api.fda.gov.

- Endpoints: /drug/enforcement.json (recalls) and /drug/label.json (SPL labels).
- Paging: limit is capped at 1000 and skip at 25000 by the API, so one query can reach at most
  26,000 records. Larger windows are split by date range (report_date / effective_time) and each
  half fetched on its own.
- Transport: one requests Session whose adapter retries with urllib3's Retry: 429 and 5xx, read
  and connect errors (GET is idempotent), exponential backoff with jitter, honouring Retry-After
  (capped at max_delay). Any other error status raises OpenFDAError naming the status and the
  API's own message. openFDA answers 404 NOT_FOUND for a search with no matches: that is an empty
  result, not an error.
"""

import json
import logging
import random
import time
from datetime import date, timedelta
from urllib.parse import urlencode

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

log = logging.getLogger(__name__)

MAX_LIMIT = 1000
MAX_SKIP = 25000
ENFORCEMENT = "/drug/enforcement.json"
LABEL = "/drug/label.json"
RETRY_STATUSES = frozenset([429, *range(500, 600)])


class OpenFDAError(RuntimeError):
    """openFDA refused the request or kept failing after the retries."""


class _Retry(Retry):
    """urllib3's Retry with this client's backoff: base * 2**(n-1) after the n-th failure, capped at
    backoff_max, jittered within [d/2, d] so concurrent clients spread out, and never shorter than
    Retry-After (itself capped at backoff_max). `sleeper` is the client's (tests record the delays)."""

    sleeper = staticmethod(time.sleep)

    def get_backoff_time(self) -> float:
        failures = len(self.history)
        if failures == 0:
            return 0.0
        delay = min(self.backoff_max, self.backoff_factor * 2 ** (failures - 1))
        return delay / 2 + random.uniform(0, delay / 2)

    def sleep(self, response=None) -> None:
        delay = self.get_backoff_time()
        retry_after = self.get_retry_after(response) if response is not None else None
        if retry_after is not None and self.respect_retry_after_header:
            delay = max(delay, min(retry_after, self.backoff_max))
        if self.history:
            last = self.history[-1]
            log.warning("openFDA %s (attempt %d/%d); retrying in %.2fs",
                        f"HTTP {last.status}" if last.status else type(last.error).__name__,
                        len(self.history), len(self.history) + (self.total or 0), delay)
        if delay > 0:
            self.sleeper(delay)


class OpenFDAClient:
    def __init__(self, base_url=None, api_key=None, timeout=None, attempts=5, base_delay=0.5, max_delay=30.0,
                 sleep=time.sleep, page_size=MAX_LIMIT):
        self.base_url = (base_url or settings.UNSAY_OPENFDA_BASE_URL).rstrip("/")
        self.api_key = settings.UNSAY_OPENFDA_API_KEY if api_key is None else api_key
        self.timeout = timeout or settings.UNSAY_OPENFDA_TIMEOUT
        self.attempts = attempts
        if not 1 <= page_size <= MAX_LIMIT:
            raise ValueError(f"page_size must be between 1 and {MAX_LIMIT} (openFDA's limit cap).")
        self.page_size = page_size
        retry_class = type("ClientRetry", (_Retry,), {"sleeper": staticmethod(sleep)})
        retry = retry_class(total=attempts - 1, connect=None, read=None, status=None, other=0,
                            allowed_methods={"GET"}, status_forcelist=RETRY_STATUSES, backoff_factor=base_delay,
                            backoff_max=max_delay, respect_retry_after_header=True, raise_on_status=False,
                            raise_on_redirect=True)
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "unsay (recall ingestion)"
        adapter = HTTPAdapter(max_retries=retry)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    # -- one request -------------------------------------------------------------------------
    def get(self, path: str, params: dict) -> dict:
        """GET one page; returns the parsed JSON body ({'meta':..., 'results': [...]})."""
        query = dict(params)
        if self.api_key:
            query["api_key"] = self.api_key
        url = f"{self.base_url}{path}?" + urlencode(query, safe=':[]+"')
        shown = url.replace(self.api_key, "***") if self.api_key else url
        try:  # (urllib3 percent-encodes the brackets and quotes on the wire; openFDA decodes them)
            response = self.session.get(url, timeout=self.timeout)
        except requests.RequestException as exc:  # connect/read errors after the retries
            problem = str(exc).replace(self.api_key, "***") if self.api_key else str(exc)
            raise OpenFDAError(f"openFDA still failing after {self.attempts} attempts for {shown}: "
                               f"{type(exc).__name__}: {problem[:300]}") from None
        with response:
            if response.status_code == 200:
                try:
                    return response.json()
                except ValueError as exc:
                    raise OpenFDAError(f"openFDA returned a body that is not JSON for {shown}: {exc}") from exc
            payload = _error_payload(response)
            if response.status_code == 404 and payload.get("code") == "NOT_FOUND":
                return {"meta": {"results": {"skip": 0, "limit": 0, "total": 0}}, "results": []}
            message = payload.get("message", response.reason)
            if response.status_code in RETRY_STATUSES:
                raise OpenFDAError(f"openFDA still failing after {self.attempts} attempts for {shown}: "
                                   f"HTTP {response.status_code} {message}")
            raise OpenFDAError(f"openFDA refused {shown}: HTTP {response.status_code} "
                               f"{payload.get('code', '')} {message}".replace("  ", " ").strip())

    # -- paging ------------------------------------------------------------------------------
    def iter_pages(self, path: str, search: str | None = None, sort: str | None = None):
        """Yield each page of one query, up to openFDA's skip/limit window (26,000 records)."""
        skip = 0
        while True:
            params = {"limit": self.page_size, "skip": skip}
            if search:
                params["search"] = search
            if sort:
                params["sort"] = sort
            page = self.get(path, params)
            results = page.get("results") or []
            yield page
            total = _total(page)
            skip += len(results)
            if not results or skip >= total or skip > MAX_SKIP:
                return

    def count(self, path: str, search: str | None) -> int:
        params = {"limit": 1}
        if search:
            params["search"] = search
        return _total(self.get(path, params))

    def fetch_range(self, path: str, field: str, since: date, until: date, extra: str = "") -> tuple[dict, list]:
        """All records with `field` in [since, until], splitting the window when it exceeds what
        skip+limit can reach. Returns (meta of the last page, results)."""
        search = f"{field}:[{since:%Y%m%d} TO {until:%Y%m%d}]" + (f" AND {extra}" if extra else "")
        total = self.count(path, search)
        if total > MAX_SKIP + self.page_size and since < until:
            middle = since + (until - since) // 2
            meta_a, first = self.fetch_range(path, field, since, middle, extra)
            meta_b, second = self.fetch_range(path, field, middle + timedelta(days=1), until, extra)
            return meta_b or meta_a, first + second
        if total > MAX_SKIP + self.page_size:
            raise OpenFDAError(f"{total} records share {field}={since:%Y%m%d}; openFDA paging cannot reach them all.")
        meta, results = {}, []
        if total == 0:
            return meta, results
        for page in self.iter_pages(path, search, sort=f"{field}:asc"):
            meta = page.get("meta", meta)
            results.extend(page.get("results") or [])
        return meta, results

    def fetch_enforcement(self, since: date, until: date | None = None, *, include_active: bool = False) -> dict:
        """Drug recalls reported in [since, until], as one API-shaped document.

        report_date never moves when FDA later updates a recall, so a window of report dates alone
        misses status changes of older recalls. With include_active the document also holds every
        recall terminated in the window and every recall still Ongoing (a few thousand; unchanged ones
        cost one hash comparison each), so terminations and re-classifications of live recalls arrive."""
        until = until or date.today()
        meta, results = self.fetch_range(ENFORCEMENT, "report_date", since, until)
        if include_active:
            for field, low, extra in (("termination_date", since, ""),
                                      ("report_date", date(2004, 1, 1), 'status:"Ongoing"')):
                more_meta, more = self.fetch_range(ENFORCEMENT, field, low, until, extra)
                meta = meta or more_meta
                results.extend(more)
            seen, unique = set(), []
            for record in results:  # the same record can match several queries; real duplicates are kept
                key = json.dumps(record, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    unique.append(record)
            results = unique
        return self._document(meta, results)

    def fetch_labels(self, since: date, until: date | None = None) -> dict:
        """Drug labels whose revision is effective in [since, until]."""
        return self._document(*self.fetch_range(LABEL, "effective_time", since, until or date.today()))

    @staticmethod
    def _document(meta, results) -> dict:
        meta = dict(meta or {})
        meta["results"] = {"skip": 0, "limit": len(results), "total": len(results)}
        return {"meta": meta, "results": results}


def _total(page: dict) -> int:
    try:
        return int(page["meta"]["results"]["total"])
    except (KeyError, TypeError, ValueError):
        return len(page.get("results") or [])


def _error_payload(response) -> dict:
    try:
        body = response.json()
        return (body.get("error") if isinstance(body, dict) else None) or {}
    except ValueError:
        return {}
