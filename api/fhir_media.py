"""What the FHIR endpoints (/api/v1/fhir/...) answer in, and how they refuse (docs/fhir.md).

    negotiate(request, offered) -> media type       from `_format`, else `Accept`; a 406 when none is offered
    answer(document, media_type, status) -> HttpResponse
    refusal(request, problem) -> HttpResponse        a problems.Problem as an OperationOutcome
    is_fhir(request) -> bool                         under /api/v1/fhir/

FHIR R4 (http.html#mime-type) names `application/fhir+json` for its JSON; a client may also ask for plain
`application/json`, and gets the same document labelled so. `_format` overrides `Accept` (`json`,
`application/json`, `application/fhir+json`; FHIR R4 http.html#parameters). A range with a `fhirVersion`
parameter other than 4.0 asks for another FHIR release and is not served. Anything else (XML, HTML, RDF) is a
406 whose OperationOutcome names what is served. The legacy type `application/json+fhir` is read as
`application/fhir+json`.

Errors on these endpoints are FHIR OperationOutcome resources, not RFC 9457 problem details: one issue for
the refusal (its problem type in `details.coding`, system `urn:unsay:problem`, so a client can look it up in
docs/api.md), one per field error. An error is labelled with the best type the request accepts, and as
`application/fhir+json` when it accepts none: a refusal is never turned into a 406.
"""

import json

from django.http import HttpResponse

from api import problems

FHIR_JSON = "application/fhir+json"
JSON = "application/json"
FHIR_PATH = "/api/v1/fhir/"
FHIR_VERSION = "4.0"
PROBLEM_SYSTEM = "urn:unsay:problem"
_ALIASES = {"application/json+fhir": FHIR_JSON}
FORMATS = {"json": FHIR_JSON, FHIR_JSON: FHIR_JSON, JSON: JSON, "application/json+fhir": FHIR_JSON}

# problems.Problem status -> OperationOutcome issue type (FHIR R4 value set issue-type)
ISSUE_TYPES = {400: "structure", 401: "login", 403: "forbidden", 404: "not-found", 406: "not-supported",
               409: "duplicate", 413: "too-costly", 415: "not-supported", 422: "invalid", 429: "throttled",
               500: "exception"}


def is_fhir(request) -> bool:
    return request.path.startswith(FHIR_PATH)


def _ranges(header: str) -> list[tuple[str, float]]:
    """(media range, q) of an Accept header, parameters other than q and fhirVersion dropped; a range
    asking for another FHIR release, or with an unreadable q, is left out."""
    found = []
    for part in header.split(","):
        media, *params = [field.strip() for field in part.split(";")]
        media = _ALIASES.get(media.lower(), media.lower())
        if "/" not in media:
            continue
        quality, served = 1.0, True
        for param in params:
            name, _, value = param.partition("=")
            name, value = name.strip().lower(), value.strip().strip('"')
            if name == "q":
                try:
                    quality = float(value)
                except ValueError:
                    served = False
            elif name == "fhirversion" and value != FHIR_VERSION:
                served = False
        if served and 0 <= quality <= 1:
            found.append((media, quality))
    return found


def _quality(media_type: str, ranges: list[tuple[str, float]]) -> float:
    """q of the most specific range that matches (RFC 9110 12.5.1); 0 when none does."""
    kind = media_type.split("/")[0]
    best, specificity = 0.0, -1
    for media, quality in ranges:
        rank = 2 if media == media_type else 1 if media == f"{kind}/*" else 0 if media == "*/*" else -1
        if rank > specificity:
            best, specificity = quality, rank
    return best if specificity >= 0 else 0.0


def _preferred(request, offered) -> str | None:
    fmt = request.GET.get("_format")
    if fmt is not None:
        # A '+' left unescaped in a query string arrives as a space: "application/fhir json".
        wanted = FORMATS.get(fmt.strip().lower().replace(" ", "+"))
        return wanted if wanted in offered else None
    header = request.headers.get("Accept", "").strip()
    if not header:
        return offered[0]
    ranges = _ranges(header)
    scored = [(_quality(media, ranges), -position, media) for position, media in enumerate(offered)]
    quality, _, media = max(scored)
    return media if quality > 0 else None


def negotiate(request, offered=(FHIR_JSON, JSON)) -> str:
    """The media type to answer in (the first offered for `*/*` or no Accept), or problems.not_acceptable."""
    media = _preferred(request, offered)
    if media is None:
        raise problems.not_acceptable(offered)
    return media


def answer(document: dict, media_type: str, status: int = 200, headers=None) -> HttpResponse:
    response = HttpResponse(json.dumps(document), status=status, content_type=f"{media_type}; charset=utf-8")
    response["Vary"] = "Accept"
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def operation_outcome(problem: problems.Problem) -> dict:
    code = ISSUE_TYPES.get(problem.status, "processing")
    severity = "fatal" if problem.status >= 500 else "error"
    issues = [{"severity": severity, "code": code,
               "details": {"coding": [{"system": PROBLEM_SYSTEM, "code": problem.slug}], "text": problem.title},
               "diagnostics": problem.detail or problem.title}]
    for error in problem.errors or []:
        field, message = error.get("field", ""), error.get("message", "")
        issues.append({"severity": severity, "code": code,
                       "diagnostics": f"{field}: {message}" if field else message})
    return {"resourceType": "OperationOutcome", "issue": issues}


def refusal(request, problem: problems.Problem) -> HttpResponse:
    media = _preferred(request, (FHIR_JSON, JSON)) or FHIR_JSON
    return answer(operation_outcome(problem), media, problem.status, problem.headers)


def recorded_outcome(receipt: dict, warning: str) -> dict:
    """A recorded MedicationDispense as FHIR says a write went (the `return=OperationOutcome` form): what was
    stored, and the recall warning as a warning issue, so a FHIR client sees it as staff would."""
    issues = [{"severity": "information", "code": "informational",
               "diagnostics": (f"Recorded dispensing {receipt['id']} for Patient/{receipt['patient']}: "
                               f"{receipt['drug'] or 'drug not named'}, lot {receipt['lot'] or 'unknown'}"
                               + (f", NDC {receipt['ndc']}" if receipt["ndc"] else "") + ".")}]
    if warning:
        issues.append({"severity": "warning", "code": "business-rule", "diagnostics": warning})
    return {"resourceType": "OperationOutcome", "issue": issues}
