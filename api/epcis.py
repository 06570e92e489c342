"""POST /api/v1/epcis: receive an EPCIS document at a site (shelf.receiving.receive, as
`manage.py receive_epcis` does). Mounted on the v1 API by api/views.py.

EPCIS 1.2 / 2.0 XML or 2.0 JSON / JSON-LD, up to EPCIS_MAX_BODY_BYTES (a DSCSA shipment notice is larger
than the other endpoints' bodies; larger files go through the command). Pharmacy keys only. The answer
lists what was applied, already received (a re-send) and refused with reasons; a document that cannot
be read at all is a 422 problem naming why. A site the key's client does not hold is a 403
(site-not-held) before the document is read: every event of a receipt acts on the units of its site.
"""

from ninja import Field, Query, Router, Schema

from api import guard, problems, services
from api.auth import ApiKeyAuth
from api.schemas import ERRORS
from ask import keys
from shelf.receiving import receive

EPCIS_TYPES = ("application/xml", "text/xml", "application/json", "application/ld+json")
EPCIS_MAX_BODY_BYTES = 20 * 1024 * 1024

router = Router()


class EpcisAuth(ApiKeyAuth):
    """The bearer key and the request limit as every endpoint; the body's size and type here, its JSON (if
    JSON) through the same depth and NUL checks; XML is read by the shelf's entity-free parser."""

    def __call__(self, request):
        guard.check_url(request)
        key = services.authenticate(keys.bearer_secret(request.headers.get("Authorization")))
        services.take_request(key)
        media = (request.content_type or "").split(";")[0].strip().lower()
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise problems.malformed("Content-Length is not a number.") from None
        if declared > EPCIS_MAX_BODY_BYTES or len(request.body) > EPCIS_MAX_BODY_BYTES:
            raise problems.too_large(EPCIS_MAX_BODY_BYTES)
        if media not in EPCIS_TYPES:
            raise problems.unsupported_media(EPCIS_TYPES)
        if "json" in media:
            guard.check_body(request, ("application/json", "application/ld+json"))
        elif b"\x00" in request.body:
            raise problems.malformed("NUL characters are not allowed.")
        return key


class RefusedEvent(Schema):
    event: str
    reason: str


class EpcisReceiptOut(Schema):
    site: str
    applied: int
    skipped: int
    refused: list[RefusedEvent] = Field(description="The first 10,000 refused events with their reasons.")
    refused_total: int = Field(description="Every refused event (each is kept at the site with its reason).")
    units_new: int
    units_changed: int


@router.post("/epcis", auth=EpcisAuth(), response={200: EpcisReceiptOut, **ERRORS},
          summary="Receive a DSCSA EPCIS document at a site (pharmacy keys of a client holding the site)",
          openapi_extra={"requestBody": {"required": True, "content": {
              **{media: {"schema": {"type": "object", "description": "An EPCIS 2.0 JSON / JSON-LD EPCISDocument."}}
                 for media in ("application/json", "application/ld+json")},
              **{media: {"schema": {"type": "string", "description": "An EPCIS 1.2 or 2.0 XML EPCISDocument."}}
                 for media in ("application/xml", "text/xml")}}}})
def epcis(request, site: str = Query(..., min_length=1, max_length=200)):
    """Units land on the site's shelf by SGTIN with lot, expiry and NDC (docs/shelf.md). Each event is
    received once (eventID, or its content hash): a re-send answers `skipped` and writes nothing. Bad events
    are refused with reasons while the others land; entity declarations in XML refuse the document.
    `site` must be one the key's client holds (granted in the admin); any other is a 403 site-not-held."""
    services.require_site(request.auth, site)
    receipt = receive(request.body, site=site, source="api", actor=f"api:{request.auth.prefix}")
    if receipt.error:
        raise problems.invalid(receipt.error)
    body = receipt.as_dict()
    body.pop("error")
    return body
