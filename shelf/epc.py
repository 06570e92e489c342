"""EPC identifiers as EPCIS names units, cases and lots (GS1 Tag Data Standard URIs and GS1 Digital Link).

    sgtin(uri) -> (gtin14, serial) | None     urn:epc:id:sgtin:0313668.040930.1001 or https://id.gs1.org/01/.../21/...
    lgtin(uri) -> (gtin14, lot) | None        urn:epc:class:lgtin:0313668.040930.4L67C035 (a lot of a product)
    is_case(uri) -> bool                      an SSCC (a logistic unit: a case or pallet)
    refusal(uri) -> str                       why a URI is neither a unit nor a case ("" when it is one)

The pure-URI forms are small enough to read here with the GS1 rules (company prefix + indicator/item
reference, check digit recomputed), so no EPC package enters the runtime image.

Every form is held to the same bounds, on the value it stands for (after %-unescaping): a serial (AI 21) or
a lot (AI 10) of at most 20 characters, a whole URI of at most MAX_URI_CHARS. An identifier over a bound is
refused whole, never cut: two serials that share their first 20 characters are two units, and cutting them
would make them one.
"""

import functools
import re
from dataclasses import dataclass
from urllib.parse import unquote

from drugs.gs1 import _check_digit

SERIAL_CHARS = 20  # GS1 AI 21
LOT_CHARS = 20     # GS1 AI 10
MAX_URI_CHARS = 200  # an SGTIN URN is under 100 characters; the column that keeps case contents holds 200

_SGTIN = re.compile(r"^urn:epc:id:sgtin:(\d{6,12})\.(\d{1,7})\.(.+)$")
_LGTIN = re.compile(r"^urn:epc:class:lgtin:(\d{6,12})\.(\d{1,7})\.(.+)$")
_SGTIN_PAT = re.compile(r"^urn:epc:idpat:sgtin:(\d{6,12})\.(\d{1,7})\.\*$")
_SSCC = re.compile(r"^urn:epc:id:sscc:(\d{6,12})\.(\d{5,11})$")
# Any host and path prefix, then the GS1 primary key and its key qualifiers, then an optional query / fragment.
_DIGITAL_LINK = re.compile(r"^https?://[^/?#]+(?:/[^?#]*?)?/(01|00)/(\d{14,18})((?:/[^/?#]+/[^/?#]*)*)/?(?:[?#].*)?$")
_QUALIFIERS = {"22": "cpv", "10": "lot", "21": "serial"}


@dataclass(frozen=True)
class _Link:
    key: str      # "01" (a GTIN) or "00" (an SSCC)
    number: str
    lot: str = ""
    serial: str = ""
    error: str = ""


@functools.lru_cache(maxsize=4096)  # a shipment repeats a handful of products
def _gtin(company: str, item: str) -> str | None:
    """GTIN-14 from the URI's company prefix and indicator+item reference (13 digits together)."""
    if len(company) + len(item) != 13:
        return None
    body = item[0] + company + item[1:]
    return body + str(_check_digit(body))


def too_long(what: str, value: str, limit: int, ai: str) -> str:
    shown = value[:40] + ("..." if len(value) > 40 else "")
    return f"The {what} {shown!r} is {len(value)} characters, longer than GS1's {limit} characters (AI {ai})."


@functools.lru_cache(maxsize=1 << 12)
def _link(uri: str) -> _Link | None:
    found = _DIGITAL_LINK.match(uri)
    if not found:
        return None
    key, number, rest = found.groups()
    if (key, len(number)) not in (("01", 14), ("00", 18)) or not _valid_number(number):
        return _Link(key, number, error=f"The Digital Link {uri[:120]!r} carries no valid GTIN-14 or SSCC.")
    parts = rest.split("/")[1:]
    values = {}
    for ai, value in zip(parts[::2], parts[1::2], strict=True):
        if key != "01" or ai not in _QUALIFIERS or ai in values or not value:
            return _Link(key, number, error=f"The Digital Link {uri[:120]!r} is not a GTIN with lot or serial.")
        values[ai] = unquote(value)
    return _Link(key, number, lot=values.get("10", ""), serial=values.get("21", ""))


# A document names each unit in several events, mostly close together; a larger cache would cost memory that
# grows with the document (about 350 bytes an entry). A chunk of receiving (5,000 events) fits.
@functools.lru_cache(maxsize=1 << 13)
def _read_sgtin(uri: str) -> tuple[tuple[str, str] | None, str]:
    """((gtin, serial), "") or (None, why not)."""
    if len(uri) > MAX_URI_CHARS:
        return None, f"The EPC {uri[:60]!r}... is {len(uri)} characters; an EPC is at most {MAX_URI_CHARS}."
    found = _SGTIN.match(uri)
    if found:
        gtin, serial = _gtin(found.group(1), found.group(2)), unquote(found.group(3))
        if not gtin:
            return None, f"The SGTIN {uri[:120]!r} does not hold 13 digits of company prefix and item reference."
    else:
        link = _link(uri)
        if link is None or link.key != "01" or not link.serial:
            return None, link.error if link and link.error else ""
        if link.error:
            return None, link.error
        gtin, serial = link.number, link.serial
    if len(serial) > SERIAL_CHARS:
        return None, too_long("serial", serial, SERIAL_CHARS, "21")
    return (gtin, serial), ""


def sgtin(uri: str) -> tuple[str, str] | None:
    return _read_sgtin((uri or "").strip())[0]


def lgtin(uri: str) -> tuple[str, str] | None:
    uri = (uri or "").strip()
    if len(uri) > MAX_URI_CHARS:
        return None
    found = _LGTIN.match(uri)
    if found:
        gtin, lot = _gtin(found.group(1), found.group(2)), unquote(found.group(3))
    else:
        link = _link(uri)
        if link is None or link.error or link.key != "01" or not link.lot or link.serial:
            return None
        gtin, lot = link.number, link.lot
    return (gtin, lot) if gtin and len(lot) <= LOT_CHARS else None


def sgtin_pattern(uri: str) -> str | None:
    """GTIN-14 of a master-data class id 'urn:epc:idpat:sgtin:0313668.040930.*' (or an LGTIN, or a Digital Link)."""
    uri = (uri or "").strip()
    found = _SGTIN_PAT.match(uri) or _LGTIN.match(uri)
    if found:
        return _gtin(found.group(1), found.group(2))
    link = _link(uri) if len(uri) <= MAX_URI_CHARS else None
    return link.number if link and not link.error and link.key == "01" else None


def is_case(uri: str) -> bool:
    uri = (uri or "").strip()
    if len(uri) > MAX_URI_CHARS:
        return False
    found = _SSCC.match(uri)
    if found:
        return len(found.group(1)) + len(found.group(2)) == 17
    link = _link(uri)
    return bool(link and not link.error and link.key == "00")


def refusal(uri: str) -> str:
    """Why `uri` names neither a unit (SGTIN) nor a case (SSCC), the same words for the same fault in every
    form; "" when it names one."""
    uri = (uri or "").strip()
    read, why = _read_sgtin(uri)
    if read or is_case(uri):
        return ""
    if why:
        return why
    if uri.startswith("urn:epc:id:sscc:"):
        return f"The SSCC {uri[:120]!r} does not hold 17 digits of company prefix and serial reference."
    return f"The EPC {uri[:120]!r} is neither an SGTIN nor an SSCC."


def _valid_number(digits: str) -> bool:
    """A GTIN-14 or an SSCC-18: digits, with GS1's check digit last."""
    return digits.isdigit() and int(digits[-1]) == _check_digit(digits[:-1])


def sgtin_uri(gtin: str, serial: str, company_digits: int = 7) -> str:
    """The SGTIN URI of a GTIN-14 and serial (test documents and the benchmark build shipments with it)."""
    company = gtin[1:1 + company_digits]
    item = gtin[0] + gtin[1 + company_digits:13]
    return f"urn:epc:id:sgtin:{company}.{item}.{serial}"
