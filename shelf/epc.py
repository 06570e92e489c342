"""EPC identifiers as EPCIS names units, cases and lots (GS1 Tag Data Standard URIs and GS1 Digital Link).

    sgtin(uri) -> (gtin14, serial) | None     urn:epc:id:sgtin:0313668.040930.1001 or https://id.gs1.org/01/.../21/...
    lgtin(uri) -> (gtin14, lot) | None        urn:epc:class:lgtin:0313668.040930.4L67C035 (a lot of a product)
    is_case(uri) -> bool                      an SSCC (a logistic unit: a case or pallet)

The pure-URI forms are small enough to read here with the GS1 rules (company prefix + indicator/item
reference, check digit recomputed), so no EPC package enters the runtime image.
"""

import functools
import re
from urllib.parse import unquote

from drugs.gs1 import _check_digit

_SGTIN = re.compile(r"^urn:epc:id:sgtin:(\d{6,12})\.(\d{1,7})\.(.{1,20})$")
_LGTIN = re.compile(r"^urn:epc:class:lgtin:(\d{6,12})\.(\d{1,7})\.(.{1,20})$")
_SGTIN_PAT = re.compile(r"^urn:epc:idpat:sgtin:(\d{6,12})\.(\d{1,7})\.\*$")
_DIGITAL_LINK = re.compile(r"^https?://[^/]+(?:/.*)?/01/(\d{14})(?:/(10|21)/([^/?#]{1,20}))?")


@functools.lru_cache(maxsize=4096)  # a shipment repeats a handful of products
def _gtin(company: str, item: str) -> str | None:
    """GTIN-14 from the URI's company prefix and indicator+item reference (13 digits together)."""
    if len(company) + len(item) != 13:
        return None
    body = item[0] + company + item[1:]
    return body + str(_check_digit(body))


@functools.lru_cache(maxsize=1 << 18)  # a document names each unit in several events
def sgtin(uri: str) -> tuple[str, str] | None:
    uri = (uri or "").strip()
    found = _SGTIN.match(uri)
    if found:
        gtin = _gtin(found.group(1), found.group(2))
        return (gtin, unquote(found.group(3))) if gtin else None
    found = _DIGITAL_LINK.match(uri)
    if found and found.group(2) == "21" and _valid_gtin(found.group(1)):
        return found.group(1), unquote(found.group(3))
    return None


def lgtin(uri: str) -> tuple[str, str] | None:
    uri = (uri or "").strip()
    found = _LGTIN.match(uri)
    if found:
        gtin = _gtin(found.group(1), found.group(2))
        return (gtin, unquote(found.group(3))) if gtin else None
    found = _DIGITAL_LINK.match(uri)
    if found and found.group(2) == "10" and _valid_gtin(found.group(1)):
        return found.group(1), unquote(found.group(3))
    return None


def sgtin_pattern(uri: str) -> str | None:
    """GTIN-14 of a master-data class id 'urn:epc:idpat:sgtin:0313668.040930.*' (or an LGTIN, or a Digital Link)."""
    uri = (uri or "").strip()
    found = _SGTIN_PAT.match(uri)
    if found:
        return _gtin(found.group(1), found.group(2))
    found = _LGTIN.match(uri)
    if found:
        return _gtin(found.group(1), found.group(2))
    found = _DIGITAL_LINK.match(uri)
    return found.group(1) if found and _valid_gtin(found.group(1)) else None


def is_case(uri: str) -> bool:
    uri = (uri or "").strip()
    return uri.startswith("urn:epc:id:sscc:") or "/00/" in uri


def _valid_gtin(gtin: str) -> bool:
    return len(gtin) == 14 and gtin.isdigit() and int(gtin[-1]) == _check_digit(gtin[:-1])


def sgtin_uri(gtin: str, serial: str, company_digits: int = 7) -> str:
    """The SGTIN URI of a GTIN-14 and serial (test documents and the benchmark build shipments with it)."""
    company = gtin[1:1 + company_digits]
    item = gtin[0] + gtin[1 + company_digits:13]
    return f"urn:epc:id:sgtin:{company}.{item}.{serial}"
