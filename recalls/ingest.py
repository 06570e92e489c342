"""openFDA records -> claims (pure functions: no database, no network; the two exceptions are named
where they are: RecallClaim's RecallText row, which memory's write inserts with the facts that refer
to it, and recall_statement of a fact's attributes that hold only their texts' reference).

One enforcement record becomes one fact per (recall, lot) when its code_info names lots, else one
drug-level fact that says every lot is treated as affected (over-notify rather than under-notify).
The record's long texts are stored once per version (recalls.models.RecallText) and each fact refers
to them. See docs/facts.md for the contract.
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from drugs import recall_terms
from drugs.identity import PRODUCT_SOURCE, product_key, product_names, resolve
from drugs.ndc import ndc_products, ndcs_in_text, normalize_ndc, normalize_product_ndc
from memory.fact_writes import Claim

from .lots.parse import parse_scope
from .lots.scope import LOT_SCOPE_VERSION, LotScope, ScopeAttribute, scope_terms
from .models import TEXT_ATTRIBUTES, TEXTS_REFERENCE, RecallText
from .selectors import resolved_attributes

ENFORCEMENT_SOURCE = "openfda:enforcement"
LABEL_SOURCE = "openfda:label"
ESCALATION_SOURCE = "demo:escalation"
CLASSIFICATIONS = ("Class I", "Class II", "Class III")
STATUSES = ("Ongoing", "Completed", "Terminated", "Pending")
CODE_INFO_MAX = 2000
# Free text copied into every fact of a record, bounded at several times the longest in real data
# (reason 729, product 4,000 - openFDA's own cap -, distribution 713, firm 81 characters). Longer is
# kept truncated and flagged (attributes["text_flag"]), never a reason to lose the record.
TEXT_LIMITS = {"reason_for_recall": 4000, "product_description": 8000, "distribution_pattern": 4000,
               "recalling_firm": 500, "event_id": 40}
LABEL_SECTIONS = ("boxed_warning", "warnings")

# Fields whose change means the recall changed. `openfda` (re-harmonised by FDA all the time),
# address lines, voluntary_mandated wording and center_classification_date are deliberately out.
HASHED_FIELDS = ("recall_number", "event_id", "classification", "status", "reason_for_recall", "recalling_firm",
                 "product_description", "distribution_pattern", "report_date", "recall_initiation_date",
                 "termination_date", "code_info", "more_code_info")


class Malformed(ValueError):
    """A record that cannot become facts; the message is the quarantine reason."""


@dataclass
class RecallClaim(Claim):
    """A recall claim whose content hash leaves out the raw code_info text: each fact is about one
    lot (or the whole drug), so re-worded or extended code_info must not re-version the lots it
    still names. Lots added or dropped change the fact set instead."""

    # code_info: see above. The identity attributes are derived from hashed fields (subject, ndcs,
    # product_description), so adding them to facts ingested before they existed re-versions nothing;
    # a fact whose subject or NDCs change is re-versioned through those.
    UNHASHED_ATTRIBUTES = ("code_info", TEXTS_REFERENCE, "ndc_products", "named_ndc_products", "identity_source",
                           "identity_text", "identity_flag", "lot_scope", "record_flag", "text_flag", "product_names")

    # The record's long texts (TEXT_ATTRIBUTES), kept out of `attributes` (the fact refers to them by
    # attributes[TEXTS_REFERENCE]) but hashed as if inline: a fact written when they were inline and the
    # same content by reference have one content hash, so the upgrade re-versions nothing.
    texts: dict = field(default_factory=dict)

    def __post_init__(self):
        # A lot-level fact carries its own lot's entry of the record's scope, not the whole list (recalls.lots).
        scope = self.attributes.get("lot_scope")
        if self.lot and isinstance(scope, ScopeAttribute):
            self.attributes = dict(self.attributes, lot_scope=scope.for_lot(self.lot))
        # What memory's write reads (memory.fact_writes.Claim): computed here, once, from the content above.
        self.digest = self._content_hash()
        reference = self.attributes.get(TEXTS_REFERENCE)
        if self.texts and reference and not self.shared_rows:
            # The RecallText row the fact refers to: inserted if absent in the transaction of the facts
            # that are written (once per digest however many lots of the record refer to it).
            self.shared_rows = (RecallText(digest=reference, **self.texts),)

    def _content_hash(self) -> str:
        base = Claim(**{name: getattr(self, name) for name in Claim.__dataclass_fields__
                        if name not in ("digest", "shared_rows")})
        base.attributes = {k: v for k, v in self.attributes.items() if k not in self.UNHASHED_ATTRIBUTES}
        # The texts as they read inline (the reference is their digest, so it adds nothing); a claim that
        # only copies a reference (demo escalation) hashes the reference.
        texts = self.texts or {TEXTS_REFERENCE: self.attributes.get(TEXTS_REFERENCE)}
        base.attributes.update((k, v) for k, v in texts.items() if k not in self.UNHASHED_ATTRIBUTES and v is not None)
        # Only the part of the scope that changes who the fact can touch is content (windows, uncertain
        # lots): adding the structured scope to facts that mean what they meant does not version them.
        terms = scope_terms(self.attributes.get("lot_scope"))
        if terms:
            base.attributes["lot_scope_terms"] = terms
        return base.content_hash()


@dataclass
class ParsedRecall:
    recall_number: str
    record_hash: str
    subject: str
    ndcs: list
    lots: list
    all_lots: bool
    attributes: dict
    valid_from: datetime
    valid_to: datetime | None
    product: str
    raw: dict = field(repr=False, default_factory=dict)
    identity: dict = field(default_factory=dict)  # identity_source, identity_text, identity_flag (see identity_of)
    lot_scope: LotScope | None = field(repr=False, default=None)
    # Another record published under an already-used recall number: what tells it apart (its event, or
    # its product), "" for the number's first record. Its facts and RecallRecord are its own.
    record: str = ""

    @property
    def record_key(self) -> str:
        """recalls.models.RecallRecord's key: the recall number, or number~record for another record."""
        return f"{self.recall_number}~{self.record}" if self.record else self.recall_number

    @property
    def scope(self) -> str:
        return "lot" if self.lots and not self.all_lots else "drug"


# openFDA recall numbers: a centre letter, then two digit groups ("D-0326-2019"); real data also has
# "D0123-2015", "D-12345-678" and "D-123-45678". Recall numbers go into URLs and fact keys, so
# anything else ("/", spaces, control characters) is refused rather than escaped later.
RECALL_NUMBER_PATTERN = re.compile(r"[A-Z]-?\d{1,5}-\d{1,5}")
CODE_INFO_SCAN_MAX = 100_000  # characters of code_info + more_code_info scanned for lots
MAX_LOTS_PER_RECORD = 1000  # the most in real data is 616 (D-0644-2020); each lot is a fact to write and embed
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def unstorable_text(value: str) -> str | None:
    """Why PostgreSQL would refuse this text (NUL in text/jsonb, a lone UTF-16 surrogate in UTF-8), or None."""
    if "\x00" in value:
        return "a NUL character"
    if _LONE_SURROGATE.search(value):
        return "a lone surrogate (not valid Unicode)"
    return None


def check_storable(value, where: str = "record", *, depth: int = 0) -> None:
    """Raise Malformed naming the first field (any depth, keys included) PostgreSQL could not store."""
    if depth > 20:
        raise Malformed(f"{where} is nested more than 20 levels deep")
    if isinstance(value, str):
        problem = unstorable_text(value)
        if problem:
            raise Malformed(f"{where} contains {problem}")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_storable(str(key), f"a field name in {where}", depth=depth + 1)
            check_storable(item, f"{where}.{key}" if where != "record" else str(key), depth=depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_storable(item, f"{where}[{index}]", depth=depth + 1)


def storable(value, *, depth: int = 0):
    """A copy of any JSON-ish value that jsonb accepts whatever came in: NULs and lone surrogates become
    U+FFFD, non-JSON values their repr, deep nesting is cut. For keeping a bad record verbatim-ish."""
    if depth > 20:
        return "<nested too deep>"
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value.replace("\x00", "\ufffd"))
    if isinstance(value, dict):
        return {storable(str(k), depth=depth + 1): storable(v, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(v, depth=depth + 1) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return storable(repr(value), depth=depth + 1)


def _text(record: dict, name: str, *, required: bool = False) -> str:
    value = record.get(name)
    if value is None:
        if required:
            raise Malformed(f"missing {name}")
        return ""
    if isinstance(value, (int,)) and not isinstance(value, bool) and name == "event_id":
        return str(value)
    if not isinstance(value, str):
        raise Malformed(f"{name} should be text, got {type(value).__name__}: {json.dumps(value)[:80]}")
    problem = unstorable_text(value)
    if problem:
        raise Malformed(f"{name} contains {problem}")
    value = value.strip()
    if required and not value:
        raise Malformed(f"missing {name}")
    return value


OPENFDA_YEARS = range(1900, 2101)


def _bounded_text(record: dict, name: str, cut: list[str], *, required: bool = False) -> str:
    """_text, at most TEXT_LIMITS[name] characters: a longer value is cut, and `cut` says so."""
    value, limit = _text(record, name, required=required), TEXT_LIMITS[name]
    if len(value) <= limit:
        return value
    cut.append(f"{name} is {len(value):,} characters; the first {limit - 1:,} are kept")
    return value[: limit - 1].rstrip() + "…"


def parse_openfda_date(value: str, name: str) -> date | None:
    if not value:
        return None
    # strptime alone is lenient ("201911" parses as 2019-01-01): insist on exactly eight digits.
    if not (len(value) == 8 and value.isascii() and value.isdigit()):
        raise Malformed(f"{name} {value[:40]!r} is not a YYYYMMDD date")
    try:
        day = datetime.strptime(value, "%Y%m%d").date()
    except ValueError:
        raise Malformed(f"{name} {value!r} is not a YYYYMMDD date") from None
    if day.year not in OPENFDA_YEARS:
        raise Malformed(f"{name} {value!r} is outside {OPENFDA_YEARS.start}..{OPENFDA_YEARS.stop - 1}")
    return day


def _midnight(day: date | None) -> datetime | None:
    return datetime(day.year, day.month, day.day, tzinfo=UTC) if day else None


def record_hash(record: dict) -> str:
    """Hash of the fields that feed the facts; null and "" are the same (more_code_info flips between them)."""
    content = {name: (record.get(name) or "") for name in HASHED_FIELDS}
    content["lot_scope_parser"] = LOT_SCOPE_VERSION  # a new parser re-reads every record once (facts decide)
    if isinstance(content["event_id"], int):
        content["event_id"] = str(content["event_id"])
    for name, value in content.items():
        if isinstance(value, str):
            content[name] = value.strip()
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


TEXT_FIELDS = ("product_description", "code_info", "more_code_info")  # the record's own words


def ndcs_of(record: dict, *, trust_openfda: bool = True) -> list[str]:
    """NDCs a recall names: openfda.package_ndc (5-4-2) and product_ndc (5-4, where no package of that
    product is listed), plus validated NDCs written in product_description and code_info. Without
    `trust_openfda` (its block names another drug, see identity_of) only the record's own text counts."""
    openfda = (record.get("openfda") or {}) if trust_openfda else {}
    if not isinstance(openfda, dict):
        openfda = {}
    packages = set()
    for raw in _text_items(openfda.get("package_ndc")):
        try:
            packages.add(normalize_ndc(raw))
        except ValueError:
            continue
    for name in TEXT_FIELDS:
        value = record.get(name)
        if isinstance(value, str):
            packages.update(ndcs_in_text(value))
    covered = {package[:10] for package in packages}
    products = set()
    for raw in _text_items(openfda.get("product_ndc")):
        try:
            product = normalize_product_ndc(raw)
        except ValueError:
            continue
        if product not in covered:
            products.add(product)
    return sorted(packages | products)


# Bumped when the way a recall's identity (subject, NDCs, identity attributes) is derived changes: a
# record remembered under an older version is re-derived once, through normal versioning.
# 1: normalised description words; 2: drugs.identity vocabulary + NDCs from text; 3: a product the
# vocabulary cannot name, or with more ingredients than a subject holds, keeps its product text as identity.
IDENTITY_VERSION = 3


def _text_items(value) -> list[str]:
    """The strings of an openFDA list field; anything else in it (an integer NDC, a nested list) is
    ignored rather than crashing the chunk: these fields only add NDCs, never decide a recall."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str)]


def product_names_of(record: dict) -> list[str]:
    """The product texts a recall prints, kept whole beside the ingredients its subject was reduced to
    (drugs.identity.product_names): its description, openFDA's brand and generic names."""
    openfda = record.get("openfda") if isinstance(record.get("openfda"), dict) else {}
    return product_names(_text_items(record.get("product_description")) + _text_items(openfda.get("brand_name"))
                         + _text_items(openfda.get("generic_name")))


SUBJECT_MAX = 200  # memory.Fact.subject
LOT_MAX = 100  # memory.Fact.lot
IDENTITY_TEXT_MAX = 300


@dataclass
class RecallIdentity:
    subject: str          # identity key; a product text key (product:...) when no ingredient is named
    source: str           # "openfda.generic_name" | "product_description" | "unresolved"
    text: str             # the words that were resolved
    flag: str             # why a person should look ("" when nothing to say)
    trust_openfda: bool   # False when the openfda block names a different drug than the description

    def attributes(self) -> dict:
        attributes = {"identity_source": self.source, "identity_text": self.text[:IDENTITY_TEXT_MAX]}
        if self.flag:
            attributes["identity_flag"] = self.flag
        return attributes


def _generic_identity(record: dict):
    """The one identity openfda.generic_name gives, or None (absent, unresolved, or its names disagree)."""
    names = (record.get("openfda") or {}).get("generic_name") or []
    if not isinstance(names, list):
        return None
    keys = {resolve(name) for name in names if isinstance(name, str) and name.strip()}
    resolved = {identity for identity in keys if identity.resolved}
    if len({identity.key for identity in resolved}) != 1 or len(resolved) != len(keys):
        return None
    return next(iter(resolved))


def identity_of(record: dict) -> RecallIdentity:
    """Which medicine a recall is about.

    openfda.generic_name wins when it resolves: FDA's harmonised name from the listing names every active
    ingredient and no vehicle or flavour. But openFDA joins that block by NDCs it regexes out of the text,
    to current listings, and sometimes lands on another product (D-1110-2015: clarithromycin tablets whose
    block says captopril). So when the description resolves to ingredients sharing none with the block's,
    the description wins, the block's NDCs are not used, and the fact is flagged for a person. A record
    neither resolves is kept with subject "" (matched by NDC product and lot only) and flagged.
    """
    description = record.get("product_description") or ""
    from_description = resolve(description)
    from_generic = _generic_identity(record)
    disjoint = from_generic and not set(from_generic.ingredients) & set(from_description.ingredients)
    if disjoint and from_description.resolved:
        return RecallIdentity(
            from_description.key, "product_description", from_description.text,
            f"openfda.generic_name says {from_generic.key!r} but product_description says "
            f"{from_description.key!r}: the description is used and openFDA's NDCs for this record are ignored",
            trust_openfda=False)
    if from_generic:
        return RecallIdentity(from_generic.key, "openfda.generic_name", from_generic.text, "", True)
    if from_description.resolved:
        return RecallIdentity(from_description.key, "product_description", from_description.text, "", True)
    text_key = product_key(description)
    return RecallIdentity(text_key, PRODUCT_SOURCE if text_key else "unresolved", from_description.text,
                          "no drug the vocabulary knows is named in product_description or openfda.generic_name: "
                          "its product text is its identity (matched by NDC product and lot, or by that text "
                          "and the exact lot) until a person identifies it", True)


def bounded(identity: RecallIdentity, description: str) -> RecallIdentity:
    """An identity key too long for a fact's subject (a parenteral nutrition product names 20 ingredients)
    is replaced by its product text key, flagged: the record is kept, never refused for its length."""
    if len(identity.subject) <= SUBJECT_MAX:
        return identity
    return RecallIdentity(product_key(description)[:SUBJECT_MAX], PRODUCT_SOURCE, identity.text,
                          f"its ingredients ({len(identity.subject)} characters as a key) are more than a subject "
                          f"holds: the product text is its identity; the ingredients were {identity.subject[:300]}",
                          identity.trust_openfda)


def subject_of(record: dict) -> str:
    """The identity key of a recall's product ("" when unresolved, see identity_of)."""
    return identity_of(record).subject


def short_product(description: str, limit: int = 140) -> str:
    text = " ".join(description.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def parse_enforcement(record) -> ParsedRecall:
    """Validate one enforcement record and derive what its facts need. Raises Malformed."""
    if not isinstance(record, dict):
        raise Malformed(f"record should be a JSON object, got {type(record).__name__}")
    check_storable(record)
    recall_number = _text(record, "recall_number", required=True)
    if len(recall_number) > 40:
        raise Malformed(f"recall_number {recall_number[:40]!r}… is longer than 40 characters")
    classification = _text(record, "classification", required=True)
    if classification not in CLASSIFICATIONS:
        raise Malformed(f"classification {classification!r} is not one of {', '.join(CLASSIFICATIONS)}")
    status = _text(record, "status", required=True)
    if status not in STATUSES:
        raise Malformed(f"status {status!r} is not one of {', '.join(STATUSES)}")
    cut: list[str] = []
    description = _bounded_text(record, "product_description", cut, required=True)
    reason = _bounded_text(record, "reason_for_recall", cut)
    firm = _bounded_text(record, "recalling_firm", cut)
    event_id = _bounded_text(record, "event_id", cut)
    distribution = _bounded_text(record, "distribution_pattern", cut)
    code_info = _text(record, "code_info")
    more_code_info = _text(record, "more_code_info")
    openfda = record.get("openfda")
    if openfda is not None and not isinstance(openfda, dict):
        raise Malformed(f"openfda should be an object, got {type(openfda).__name__}")
    initiated = parse_openfda_date(_text(record, "recall_initiation_date", required=True), "recall_initiation_date")
    terminated = parse_openfda_date(_text(record, "termination_date"), "termination_date")
    reported = parse_openfda_date(_text(record, "report_date"), "report_date")
    if terminated and terminated < initiated:
        raise Malformed(f"termination_date {terminated} is before recall_initiation_date {initiated}")
    identity = bounded(identity_of(record), record.get("product_description") or "")
    full_code_info = " ".join(part for part in (code_info, more_code_info) if part)
    if len(full_code_info) > CODE_INFO_SCAN_MAX:
        raise Malformed(f"code_info is {len(full_code_info)} characters; at most {CODE_INFO_SCAN_MAX} are read for "
                        f"lots (the longest in real data is about 32,600)")
    scope = parse_scope(code_info, more_code_info)
    lots = scope.lot_numbers
    if len(lots) > MAX_LOTS_PER_RECORD:
        raise Malformed(f"code_info lists {len(lots)} lots; at most {MAX_LOTS_PER_RECORD} per record are ingested "
                        f"(the most in real data is 616): check the record and split it")
    too_long = [lot for lot in lots if len(lot) > LOT_MAX]
    if too_long:
        raise Malformed(f"lot {too_long[0][:40]}… is longer than {LOT_MAX} characters")
    # Checked last, so a broken copy of a real record reports its first real problem.
    if not RECALL_NUMBER_PATTERN.fullmatch(recall_number):
        raise Malformed(f"recall_number {recall_number!r} is not an FDA recall number (like D-0326-2019)")
    # The text says every lot (perhaps within a window): one drug-level fact carrying the window, never lot
    # strings. A text naming no lot at all is drug-level too (ParsedRecall.scope), worded differently.
    all_lots = scope.says_all_lots
    lot_scope = scope.as_attribute()
    if lot_scope["expiry_window"] == [None, None]:
        # "within expiry": unexpired when recalled. An open start with an end ("expiration dates up to
        # 11/17/2015") stays open: the text names no start, and the recall may postdate the end.
        lot_scope["expiry_window"][0] = initiated.isoformat()
    attributes = {
        "recall_number": recall_number,
        "event_id": event_id,
        "classification": classification,
        "status": status,
        "reason": reason,
        "firm": firm,
        "product_description": description,
        "distribution": distribution,
        "report_date": reported.isoformat() if reported else None,
        "recall_initiation_date": initiated.isoformat(),
        "termination_date": terminated.isoformat() if terminated else None,
        "code_info": full_code_info[:CODE_INFO_MAX],
        "lot_scope": lot_scope,
        **({"text_flag": "; ".join(cut)} if cut else {}),
    }
    return ParsedRecall(
        recall_number=recall_number, record_hash=record_hash(record), subject=identity.subject,
        ndcs=ndcs_of(record, trust_openfda=identity.trust_openfda), lots=lots, all_lots=all_lots,
        attributes=attributes, valid_from=_midnight(initiated), valid_to=_midnight(terminated),
        product=short_product(description), raw=record, identity=identity.attributes(), lot_scope=scope,
    )


def texts_digest(texts: dict) -> str:
    """The content address of a record's long texts (recalls.models.RecallText.digest)."""
    canonical = json.dumps({name: texts.get(name) or "" for name in TEXT_ATTRIBUTES}, sort_keys=True,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def split_texts(attributes: dict) -> tuple[dict, dict]:
    """(attributes with a reference instead of the long texts, the texts)."""
    texts = {name: attributes.get(name) or "" for name in TEXT_ATTRIBUTES}
    short = {k: v for k, v in attributes.items() if k not in TEXT_ATTRIBUTES}
    short[TEXTS_REFERENCE] = texts_digest(texts)
    return short, texts


def recall_statement(attributes: dict, lot: str | None, *, all_lots: bool = False) -> str:
    if TEXTS_REFERENCE in attributes and not any(name in attributes for name in TEXT_ATTRIBUTES):
        # A new version built from a believed fact's attributes (demo escalation) holds the reference only.
        attributes = resolved_attributes(attributes)
    product = short_product(attributes.get("product_description") or "")
    if lot:
        what = f"{product} lot {lot}"
    elif all_lots:
        what = f"{product}, all lots (the recall covers every lot)"
    else:
        what = f"{product}, all lots (the recall names no lot number, so every lot is treated as affected)"
    reason = " ".join((attributes.get("reason") or "").split())
    if len(reason) > 400:
        reason = reason[:399].rstrip() + "…"
    firm = attributes.get("firm") or "an unnamed firm"
    return (f"{attributes['classification']} recall {attributes['recall_number']} ({attributes['status']}) "
            f"of {what} by {firm}: {reason}")


recall_fact_key = recall_terms.fact_key


def recall_claims(parsed: ParsedRecall, *, subject: str, ndcs: list, identity: dict | None = None,
                  source_ref: str = "", asserted_by: str = "") -> list[RecallClaim]:
    """One claim per lot (or one drug-level claim). `subject`/`ndcs`/`identity` are passed in because a
    recall's identity is fixed when first derived (recalls.models.RecallRecord)."""
    scope = parsed.scope
    lots = parsed.lots if scope == "lot" else [None]
    identity = parsed.identity if identity is None else identity
    # The record's NDC products, once per record (a recall may list thousands of lots).
    listed = ndc_products(ndcs)
    named = ndc_products(ndcs_in_text(" ".join(parsed.raw.get(name) or "" for name in TEXT_FIELDS
                                               if isinstance(parsed.raw.get(name), str))))
    products = {"ndc_products": sorted(listed), "named_ndc_products": sorted(named & listed),
                "product_names": product_names_of(parsed.raw)}
    short, texts = split_texts(parsed.attributes)  # the texts once per record, referred to by every lot

    def statement(lot):
        return recall_statement(parsed.attributes, lot, all_lots=parsed.all_lots)

    claims = []
    for lot in lots:
        attributes = dict(short, scope=scope, ndcs=list(ndcs), **products, **identity)
        claims.append(RecallClaim(
            fact_key=recall_fact_key(parsed.recall_number, lot, parsed.record), kind="recall", subject=subject, lot=lot,
            statement=statement(lot), source=ENFORCEMENT_SOURCE, texts=texts,
            attributes=attributes, source_ref=source_ref[:255], valid_from=parsed.valid_from,
            valid_to=parsed.valid_to, asserted_by=asserted_by,
        ))
    return claims


# --- labels ---------------------------------------------------------------------------------


def _joined(value) -> str:
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise Malformed("label section should be a list of text")
        return " ".join(" ".join(v.split()) for v in value).strip()
    if isinstance(value, str):
        return " ".join(value.split())
    raise Malformed(f"label section should be text, got {type(value).__name__}")


def label_claims(record, *, source_ref: str = "", asserted_by: str = "") -> tuple[str, int, list[Claim]]:
    """(set_id, version, claims) for one SPL label record: its boxed warning and warnings sections.
    PLR-format labels put warnings under `warnings_and_cautions`; that text is used for `warnings`
    when the label has no `warnings` section."""
    if not isinstance(record, dict):
        raise Malformed(f"record should be a JSON object, got {type(record).__name__}")
    check_storable(record)
    set_id = _text(record, "set_id", required=True)
    label_id = _text(record, "id", required=True)
    try:
        version = int(_text(record, "version", required=True))
    except ValueError:
        raise Malformed(f"version {record.get('version')!r} is not a number") from None
    effective = parse_openfda_date(_text(record, "effective_time", required=True), "effective_time")
    openfda = record.get("openfda") or {}
    if not isinstance(openfda, dict):
        raise Malformed("openfda should be an object")
    brand = (openfda.get("brand_name") or [""])[0]
    generic = (openfda.get("generic_name") or [""])[0]
    if not (brand or generic):
        raise Malformed("label has no openfda generic_name or brand_name to name the drug")
    identity = resolve(generic) if resolve(generic).resolved else resolve(brand)
    subject = identity.key  # "" when unresolved: kept, flagged for a person (identity_flag), never guessed
    sections = {}
    if record.get("boxed_warning"):
        sections["boxed_warning"] = _joined(record["boxed_warning"])
    if record.get("warnings"):
        sections["warnings"] = _joined(record["warnings"])
    elif record.get("warnings_and_cautions"):
        sections["warnings"] = _joined(record["warnings_and_cautions"])
    claims = []
    for section, text in sections.items():
        if not text:
            continue
        title = "Boxed warning" if section == "boxed_warning" else "Warnings"
        name = f"{brand} ({generic})" if brand and generic and brand.lower() != generic.lower() else (brand or generic)
        statement = f"{title} on the {name} label (version {version}, effective {effective}): {text}"
        claims.append(Claim(
            fact_key=f"label:{set_id}:{section}", kind="label", subject=subject, lot=None,
            statement=statement[:6000], source=LABEL_SOURCE,
            attributes={"set_id": set_id, "label_id": label_id, "label_version": version,
                        "effective_time": effective.isoformat(), "section": section, "brand_name": brand,
                        "identity_source": ("openfda.generic_name" if resolve(generic).resolved
                                            else "openfda.brand_name" if subject else "unresolved"),
                        "identity_text": identity.text[:IDENTITY_TEXT_MAX],
                        **({} if subject else {"identity_flag": f"the vocabulary does not know {generic or brand!r}"})},
            source_ref=source_ref[:255], valid_from=_midnight(effective), asserted_by=asserted_by,
        ))
    return set_id, version, claims
