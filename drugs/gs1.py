"""Reading the GS1 DataMatrix on a US prescription package (DSCSA product identifier).

    parse_scan(text) -> Scan        GTIN (01), expiry (17), lot (10), serial (21) of one scan
    ndc_candidates(gtin) -> [...]   the NDC-11s a US drug GTIN can stand for (hyphenation is ambiguous)
    gtin_for_ndc(ndc) -> str        the GTIN-14 of a hyphenated NDC (the inverse; tests and checks)

EPC identifiers, as EPCIS names units, lots and cases (GS1 Tag Data Standard URIs and GS1 Digital Link):

    sgtin(uri) -> (gtin14, serial) | None     urn:epc:id:sgtin:0313668.040930.1001 or https://id.gs1.org/01/.../21/...
    lgtin(uri) -> (gtin14, lot) | None        urn:epc:class:lgtin:0313668.040930.4L67C035 (a lot of a product)
    sgtin_pattern(uri) -> gtin14 | None       urn:epc:idpat:sgtin:0313668.040930.* (master data's class id)
    is_case(uri) -> bool                      an SSCC (a logistic unit: a case or pallet)
    epc_refusal(uri) -> str                   why a URI is neither a unit nor a case ("" when it is one)
    sgtin_uri(gtin, serial) -> str            the SGTIN URN of a GTIN-14 and serial

Parsing is done by `biip` (pinned in requirements.txt). What a scanner sends varies:
- the group separator (GS, ASCII 29) that ends a variable-length field is often lost by keyboard
  wedges and browsers, so scanners are set to send a printable substitute; we accept GS itself,
  its visible symbol U+241D, the characters '|', '^' and '~' (none of them is in GS1's character
  set 82, so none can be part of a lot or serial) and the spelled-out tokens '<GS>', '[GS]', '{GS}',
  '<FNC1>', '\\x1d';
- a symbology identifier in front (']d2' DataMatrix, ']C1' GS1-128, ']Q3' QR), which biip reads;
- the human-readable line printed under the code, '(01)00300937367567(17)270531(10)ABC1234...',
  read with GS1Message.parse_hri;
- a GS1 Digital Link URI (https://id.gs1.org/01/...), which biip reads too.
Expiry day '00' means the last day of the month (biip). Dates in the past are accepted: staff record
old fills, and an expired pack is the model's concern (expiry before dispensing is refused there).

Without any separator, a lot or serial that is not the last field swallows the fields after it
('10ABC123421SN1' reads as lot 'ABC123421SN1'). That cannot be undone, so such a scan is refused
when the field that swallowed could have hidden a missing one (ScanError says what to do).

A Digital Link is read by biip as well (GS1's rules: the key qualifiers 22, 10, 21 in that order, each
value in GS1's character set and length, check digits); only its path names the item, so a query or
fragment is not read. The EPC URNs are read here with the Tag Data Standard's rules: company prefix and
indicator with item reference, 13 digits (17 for an SSCC), the check digit computed, %-escapes undone. A URN
is three fields split at dots; a maintained EPC package (epcpy) read GS1's examples alike but took seven
times the CPU per URN and 1.27 times as long to receive a shipment (bench/epc_readers.py, docs/shelf.md).

Every form is held to the same bounds, on the value it stands for (after %-unescaping): a serial (AI 21) or a
lot (AI 10) of at most 20 characters, a whole URI of at most MAX_EPC_CHARS. An identifier over a bound is
refused whole, never cut: two serials that share their first 20 characters are two units.
"""

import functools
import re
from dataclasses import dataclass, field
from datetime import date
from urllib.parse import unquote, urlsplit

from biip import ParseConfig, ParseError, parse
from biip.gs1_digital_link_uris import GS1DigitalLinkURI
from biip.gs1_messages import GS1Message

GROUP_SEPARATOR = "\x1d"
# Single characters a scanner may be configured to send in place of GS (outside GS1 character set 82).
SEPARATOR_SUBSTITUTES = ("\u241d", "|", "^", "~")
# Spelled-out separators seen in scanner set-ups and in text pasted from barcode tools.
SEPARATOR_TOKENS = ("<GS>", "[GS]", "{GS}", "<FNC1>", "[FNC1]", "\\x1d", "\\x1D", "\\u001d", "\\u001D", "\\035")
PARSE_CONFIG = ParseConfig(separator_chars=[GROUP_SEPARATOR, *SEPARATOR_SUBSTITUTES])

AI_GTIN, AI_EXPIRY, AI_LOT, AI_SERIAL = "01", "17", "10", "21"
_VARIABLE_LENGTH = {AI_LOT, AI_SERIAL}
# A GTIN built from an NDC: GTIN-12 = '3' + NDC-10 + check digit, i.e. GTIN-14 '?03' + NDC-10 + check
# (the first digit is the packaging level indicator: 0 for the unit of sale).
_NDC_GTIN = re.compile(r"^\d03(\d{10})\d$")
MAX_SCAN_LENGTH = 300  # a DSCSA DataMatrix holds well under 100 characters; anything longer is not one scan


class ScanError(ValueError):
    """A scan that cannot be read as a package identifier, with what to do about it."""


@dataclass(frozen=True)
class NdcCandidate:
    printed: str  # as it would be printed on the pack: '0093-7367-56'
    ndc11: str    # 5-4-2: '00093-7367-56'
    layout: str   # '4-4-2', '5-3-2' or '5-4-1'

    @property
    def product(self) -> str:
        return self.ndc11[:10]  # labeler + product, '00093-7367'


@dataclass(frozen=True)
class Scan:
    raw: str
    gtin: str = ""                      # GTIN-14, check digit verified
    expiry: date | None = None
    lot: str = ""                       # as encoded (not normalised)
    serial: str = ""
    candidates: tuple[NdcCandidate, ...] = field(default=())  # empty when there is no GTIN

    @property
    def is_us_drug(self) -> bool:
        return bool(self.candidates)


def _clean(text: str) -> str:
    text = (text or "").strip()
    for token in SEPARATOR_TOKENS:
        text = text.replace(token, GROUP_SEPARATOR)
    # GS1 data has no whitespace: spaces come from how the text was typed or pasted ('01 0030...').
    return re.sub(r"[ \t\r\n]+", "", text)  # not \s: it matches GS (ASCII 29) too


def _has_separator(text: str) -> bool:
    return any(ch in text for ch in (GROUP_SEPARATOR, *SEPARATOR_SUBSTITUTES))


def _elements(text: str) -> list[tuple[str, str, object]]:
    """(AI, value, element) of each field; a linear UPC-A/GTIN barcode (older packs) gives the GTIN alone."""
    if text.startswith("("):
        try:
            message = GS1Message.parse_hri(text)
        except ParseError as exc:
            raise ScanError(f"The printed barcode text could not be read: {str(exc).rstrip('.')}.") from exc
    else:
        try:
            result = parse(text, config=PARSE_CONFIG)
        except ParseError as exc:
            raise ScanError(f"The scan is not a GS1 barcode: {str(exc).rstrip('.')}.") from exc
        if result.gs1_message is not None:
            message = result.gs1_message
        elif result.gs1_digital_link_uri is not None:
            message = result.gs1_digital_link_uri.as_gs1_message()
        elif result.gtin is not None and text.isdigit():
            return [(AI_GTIN, result.gtin.value.zfill(14), None)]
        else:
            reason = (result.gs1_message_error or "no GS1 fields found").rstrip(".")
            raise ScanError(f"The scan is not a GS1 DataMatrix message: {reason}.")
    return [(element.ai.ai, element.value, element) for element in message.element_strings]


def parse_scan(text: str) -> Scan:
    """Read one scan (raw scanner output, printed '(01)...' text or a Digital Link URI)."""
    cleaned = _clean(text)
    if not cleaned:
        raise ScanError("The scan is empty.")
    if len(cleaned) > MAX_SCAN_LENGTH:
        raise ScanError(f"The scan is {len(cleaned)} characters long; one package barcode is under "
                        f"{MAX_SCAN_LENGTH}. Scan one code at a time.")
    values: dict[str, str] = {}
    expiry = None
    order = []
    for ai, value, element in _elements(cleaned):
        if element is not None and element.gtin_error:
            raise ScanError(f"The GTIN in the scan is wrong ({str(element.gtin_error).rstrip('.')}); scan again.")
        if ai in values and values[ai] != value:
            raise ScanError(f"The scan holds two different values for ({ai}): {values[ai]!r} and {value!r}.")
        values[ai] = value
        order.append(ai)
        if ai == AI_EXPIRY:
            expiry = element.date
    if not cleaned.startswith("(") and not _has_separator(cleaned):
        _refuse_swallowed_fields(order, values)
    gtin = values.get(AI_GTIN, "")
    return Scan(raw=text, gtin=gtin, expiry=expiry, lot=values.get(AI_LOT, ""), serial=values.get(AI_SERIAL, ""),
                candidates=tuple(ndc_candidates(gtin)) if gtin else ())


def _refuse_swallowed_fields(order: list[str], values: dict[str, str]) -> None:
    """With no separator, only the last field may be variable-length, and it may have swallowed a
    field that should follow it. Refuse when a package field is missing and its AI occurs inside it."""
    if not order or order[-1] not in _VARIABLE_LENGTH:
        return
    last_ai = order[-1]
    tail = values[last_ai]
    hidden = [ai for ai in (AI_EXPIRY, AI_LOT, AI_SERIAL) if ai not in values and ai in tail]
    if hidden:
        names = {AI_EXPIRY: "expiry (17)", AI_LOT: "lot (10)", AI_SERIAL: "serial (21)"}
        what = {AI_LOT: "lot", AI_SERIAL: "serial"}[last_ai]
        raise ScanError(
            f"The scan has no group separator, so where the {what} ends is unknown: it reads as {tail!r}, which "
            f"may include the {' and '.join(names[ai] for ai in hidden)}. Set the scanner to send GS (ASCII 29) or "
            f"one of {' '.join(SEPARATOR_SUBSTITUTES[1:])} after variable-length fields, or type the lot and "
            "serial from the pack."
        )


def ndc_candidates(gtin: str) -> list[NdcCandidate]:
    """The NDC-11s a GTIN can stand for: its 10 NDC digits read as 4-4-2, 5-3-2 and 5-4-1. Which one is
    right is not in the barcode (it needs the FDA NDC Directory); see patients.scanning. [] when the
    GTIN is not built from an NDC (GS1 US prefix 03)."""
    matched = _NDC_GTIN.match((gtin or "").zfill(14))
    if not matched:
        return []
    d = matched.group(1)
    return [
        NdcCandidate(f"{d[:4]}-{d[4:8]}-{d[8:]}", f"0{d[:4]}-{d[4:8]}-{d[8:]}", "4-4-2"),
        NdcCandidate(f"{d[:5]}-{d[5:8]}-{d[8:]}", f"{d[:5]}-0{d[5:8]}-{d[8:]}", "5-3-2"),
        NdcCandidate(f"{d[:5]}-{d[5:9]}-{d[9:]}", f"{d[:5]}-{d[5:9]}-0{d[9:]}", "5-4-1"),
    ]


def gtin_for_ndc(ndc: str, *, indicator: str = "0") -> str:
    """GTIN-14 of an NDC printed with its hyphens ('0378-5814-77' -> '00303785814771'). The 11-digit
    form cannot be used: which zero was padding is exactly what the barcode does not keep."""
    parts = (ndc or "").strip().split("-")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts) or \
            tuple(len(p) for p in parts) not in {(4, 4, 2), (5, 3, 2), (5, 4, 1)}:
        raise ValueError(f"{ndc!r} is not a 10-digit NDC hyphenated 4-4-2, 5-3-2 or 5-4-1.")
    body = indicator + "03" + "".join(parts)
    return body + str(_check_digit(body))


def _check_digit(body: str) -> int:
    # GS1 mod-10: weights 3, 1, 3, ... from the rightmost digit of the body.
    total = sum(int(ch) * (3 if i % 2 == 0 else 1) for i, ch in enumerate(reversed(body)))
    return (10 - total % 10) % 10


# --- EPC identifiers (EPCIS) -------------------------------------------------------------------------------

SERIAL_CHARS = 20  # GS1 AI 21
LOT_CHARS = 20     # GS1 AI 10
MAX_EPC_CHARS = 200  # an SGTIN URN is under 100 characters; the column that keeps case contents holds 200

_SGTIN = re.compile(r"^urn:epc:id:sgtin:(\d{6,12})\.(\d{1,7})\.(.+)$")
_LGTIN = re.compile(r"^urn:epc:class:lgtin:(\d{6,12})\.(\d{1,7})\.(.+)$")
_SGTIN_PATTERN = re.compile(r"^urn:epc:idpat:sgtin:(\d{6,12})\.(\d{1,7})\.\*$")
_SSCC = re.compile(r"^urn:epc:id:sscc:(\d{6,12})\.(\d{5,11})$")
# A Digital Link names a GTIN (01) or an SSCC (00) as a path segment after any host and path prefix.
_LINK_KEY = re.compile(r"^https?://[^/?#]+/(?:[^?#]*?/)?(01|00)/")


@dataclass(frozen=True)
class _Link:
    key: str      # "01" (a GTIN) or "00" (an SSCC)
    number: str
    lot: str = ""
    serial: str = ""
    error: str = ""


@functools.lru_cache(maxsize=4096)  # a shipment repeats a handful of products
def _gtin(company: str, item: str) -> str | None:
    """GTIN-14 from a URN's company prefix and indicator+item reference (13 digits together)."""
    if len(company) + len(item) != 13:
        return None
    body = item[0] + company + item[1:]
    return body + str(_check_digit(body))


def too_long(what: str, value: str, limit: int, ai: str) -> str:
    shown = value[:40] + ("..." if len(value) > 40 else "")
    return f"The {what} {shown!r} is {len(value)} characters, longer than GS1's {limit} characters (AI {ai})."


@functools.lru_cache(maxsize=1 << 12)
def _link(uri: str) -> _Link | None:
    """The Digital Link's key and qualifiers (biip), or None when `uri` is no Digital Link of a GTIN or SSCC."""
    found = _LINK_KEY.match(uri)
    if not found:
        return None
    key = found.group(1)
    path = urlsplit(uri).path
    # biip refuses a serial over 20 characters as any malformed value; say what every form says of it.
    parts = path.split("/")
    for ai, value in zip(parts, parts[1:], strict=False):
        if ai == "21" and key == "01" and len(unquote(value)) > SERIAL_CHARS:
            return _Link(key, "", error=too_long("serial", unquote(value), SERIAL_CHARS, "21"))
    try:
        elements = GS1DigitalLinkURI.parse(uri.split("?", 1)[0].split("#", 1)[0]).element_strings
    except ParseError as exc:
        return _Link(key, "", error=f"The Digital Link {uri[:120]!r} is not a GTIN with lot or serial, nor an SSCC: "
                                    f"{str(exc).rstrip('.')}.")
    values = {element.ai.ai: element for element in elements}
    key = elements[0].ai.ai  # biip reads the primary key first
    primary = values[key]
    if key not in ("01", "00") or primary.gtin_error or primary.sscc_error or set(values) - {key, "22", "10", "21"}:
        return _Link(key, "", error=f"The Digital Link {uri[:120]!r} carries no valid GTIN-14 or SSCC.")
    return _Link(key, primary.value, lot=values["10"].value if "10" in values else "",
                 serial=values["21"].value if "21" in values else "")


# A document names each unit in several events, mostly close together; a larger cache would cost memory that
# grows with the document (about 350 bytes an entry). A chunk of receiving (5,000 events) fits.
@functools.lru_cache(maxsize=1 << 13)
def _read_sgtin(uri: str) -> tuple[tuple[str, str] | None, str]:
    """((gtin, serial), "") or (None, why not)."""
    if len(uri) > MAX_EPC_CHARS:
        return None, f"The EPC {uri[:60]!r}... is {len(uri)} characters; an EPC is at most {MAX_EPC_CHARS}."
    found = _SGTIN.match(uri)
    if found:
        gtin, serial = _gtin(found.group(1), found.group(2)), unquote(found.group(3))
        if not gtin:
            return None, f"The SGTIN {uri[:120]!r} does not hold 13 digits of company prefix and item reference."
    else:
        link = _link(uri)
        if link is None:
            return None, ""
        if link.error or link.key != "01" or not link.serial:
            return None, link.error
        gtin, serial = link.number, link.serial
    if len(serial) > SERIAL_CHARS:
        return None, too_long("serial", serial, SERIAL_CHARS, "21")
    return (gtin, serial), ""


def sgtin(uri: str) -> tuple[str, str] | None:
    """(GTIN-14, serial) of a unit's SGTIN URN or Digital Link; None when `uri` names no unit."""
    return _read_sgtin((uri or "").strip())[0]


def lgtin(uri: str) -> tuple[str, str] | None:
    """(GTIN-14, lot) of an LGTIN URN or a Digital Link with a lot and no serial; None otherwise."""
    uri = (uri or "").strip()
    if len(uri) > MAX_EPC_CHARS:
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
    found = _SGTIN_PATTERN.match(uri) or _LGTIN.match(uri)
    if found:
        return _gtin(found.group(1), found.group(2))
    link = _link(uri) if len(uri) <= MAX_EPC_CHARS else None
    return link.number if link and not link.error and link.key == "01" else None


def is_case(uri: str) -> bool:
    """Whether `uri` names an SSCC (a case or pallet), as a URN or a Digital Link."""
    uri = (uri or "").strip()
    if len(uri) > MAX_EPC_CHARS:
        return False
    found = _SSCC.match(uri)
    if found:
        return len(found.group(1)) + len(found.group(2)) == 17
    link = _link(uri)
    return bool(link and not link.error and link.key == "00")


def epc_refusal(uri: str) -> str:
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


def sgtin_uri(gtin: str, serial: str, company_digits: int = 7) -> str:
    """The SGTIN URN of a GTIN-14 and serial (test documents, the demo and the benchmarks build shipments with it)."""
    company = gtin[1:1 + company_digits]
    item = gtin[0] + gtin[1 + company_digits:13]
    return f"urn:epc:id:sgtin:{company}.{item}.{serial}"
