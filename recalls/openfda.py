"""openFDA HTTP client: the one seam between Unsay and api.fda.gov.

- Endpoints: /drug/enforcement.json (recalls) and /drug/label.json (SPL labels).
- Paging: limit is capped at 1000 and skip at 25000 by the API, so one query can reach at most
  26,000 records. Larger windows are split by date range (report_date / effective_time) and each
  half fetched on its own.
- Retries 429 and 5xx (and timeouts / connection errors) with exponential backoff and jitter,
  honouring Retry-After; any other error status raises OpenFDAError naming the status and the
  API's own message. openFDA answers 404 NOT_FOUND for a search with no matches: that is an empty
  result, not an error.
"""

import json
import logging
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import date, timedelta

from django.conf import settings

log = logging.getLogger(__name__)

MAX_LIMIT = 1000
MAX_SKIP = 25000
ENFORCEMENT = "/drug/enforcement.json"
LABEL = "/drug/label.json"


class OpenFDAError(RuntimeError):
    """openFDA refused the request or kept failing after the retries."""


class OpenFDAClient:
    def __init__(self, base_url=None, api_key=None, timeout=None, attempts=5, base_delay=0.5, max_delay=30.0,
                 sleep=time.sleep, page_size=MAX_LIMIT):
        self.base_url = (base_url or settings.UNSAY_OPENFDA_BASE_URL).rstrip("/")
        self.api_key = settings.UNSAY_OPENFDA_API_KEY if api_key is None else api_key
        self.timeout = timeout or settings.UNSAY_OPENFDA_TIMEOUT
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep
        if not 1 <= page_size <= MAX_LIMIT:
            raise ValueError(f"page_size must be between 1 and {MAX_LIMIT} (openFDA's limit cap).")
        self.page_size = page_size
        self.requests = 0

    # -- one request -------------------------------------------------------------------------
    def get(self, path: str, params: dict) -> dict:
        """GET one page; returns the parsed JSON body ({'meta':..., 'results': [...]})."""
        query = dict(params)
        if self.api_key:
            query["api_key"] = self.api_key
        url = f"{self.base_url}{path}?" + urllib.parse.urlencode(query, safe=':[]+"')
        shown = url.replace(self.api_key, "***") if self.api_key else url
        last_problem = ""
        for attempt in range(1, self.attempts + 1):
            self.requests += 1
            retry_after = None
            try:
                with urllib.request.urlopen(url, timeout=self.timeout) as response:
                    body = response.read()
                try:
                    return json.loads(body)
                except ValueError as exc:
                    raise OpenFDAError(f"openFDA returned a body that is not JSON for {shown}: {exc}") from exc
            except urllib.error.HTTPError as exc:
                payload = _error_payload(exc)
                if exc.code == 404 and payload.get("code") == "NOT_FOUND":
                    return {"meta": {"results": {"skip": 0, "limit": 0, "total": 0}}, "results": []}
                if exc.code != 429 and exc.code < 500:
                    raise OpenFDAError(
                        f"openFDA refused {shown}: HTTP {exc.code} {payload.get('code', '')} "
                        f"{payload.get('message', exc.reason)}".strip()
                    ) from exc
                retry_after = _retry_after_seconds(exc.headers.get("Retry-After") if exc.headers else None)
                last_problem = f"HTTP {exc.code} {payload.get('message', exc.reason)}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last_problem = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            if attempt == self.attempts:
                break
            delay = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
            delay = delay / 2 + random.uniform(0, delay / 2)  # jitter: concurrent clients spread out
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.max_delay))
            log.warning("openFDA %s (attempt %d/%d); retrying in %.2fs", last_problem, attempt, self.attempts, delay)
            self.sleep(delay)
        raise OpenFDAError(f"openFDA still failing after {self.attempts} attempts for {shown}: {last_problem}")

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


def _error_payload(exc: urllib.error.HTTPError) -> dict:
    try:
        body = json.loads(exc.read() or b"{}")
        return body.get("error") or {}
    except (ValueError, AttributeError, OSError):
        return {}


def _retry_after_seconds(value) -> float | None:
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None
