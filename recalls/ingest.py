"""openFDA records -> claims (pure functions: no database, no network; the two exceptions are named
where they are: RecallClaim's RecallText row, which memory's write inserts with the facts that refer
to it, and recall_statement of a fact's attributes that hold only their texts' reference).

Reading a record's fields: recalls.record_fields; which medicine it is about: recalls.record_identity.
One enforcement record becomes one fact per (recall, lot) when its code_info names lots, else one
drug-level fact that says every lot is treated as affected (over-notify rather than under-notify).
The record's long texts are stored once per version (recalls.models.RecallText) and each fact refers
to them. See docs/facts.md for the contract.
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from drugs import recall_terms
from drugs.identity import resolve
from drugs.ndc import ndc_products, ndcs_in_text
from memory.fact_writes import Claim

from .lots.parse import parse_scope
from .lots.scope import LotScope, ScopeAttribute, scope_terms
from .models import TEXT_ATTRIBUTES, TEXTS_REFERENCE, RecallText
from .record_fields import (
    Malformed,
    bounded_text,
    check_storable,
    midnight,
    parse_openfda_date,
    record_hash,
    text_field,
)
from .record_identity import (
    IDENTITY_TEXT_MAX,
    LOT_MAX,
    TEXT_FIELDS,
    bounded,
    identity_of,
    ndcs_of,
    product_names_of,
    short_product,
)
from .selectors import resolved_attributes

ENFORCEMENT_SOURCE = "openfda:enforcement"
LABEL_SOURCE = "openfda:label"
ESCALATION_SOURCE = "demo:escalation"
CLASSIFICATIONS = ("Class I", "Class II", "Class III")
STATUSES = ("Ongoing", "Completed", "Terminated", "Pending")
CODE_INFO_MAX = 2000


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
def parse_enforcement(record) -> ParsedRecall:
    """Validate one enforcement record and derive what its facts need. Raises Malformed."""
    if not isinstance(record, dict):
        raise Malformed(f"record should be a JSON object, got {type(record).__name__}")
    check_storable(record)
    recall_number = text_field(record, "recall_number", required=True)
    if len(recall_number) > 40:
        raise Malformed(f"recall_number {recall_number[:40]!r}… is longer than 40 characters")
    classification = text_field(record, "classification", required=True)
    if classification not in CLASSIFICATIONS:
        raise Malformed(f"classification {classification!r} is not one of {', '.join(CLASSIFICATIONS)}")
    status = text_field(record, "status", required=True)
    if status not in STATUSES:
        raise Malformed(f"status {status!r} is not one of {', '.join(STATUSES)}")
    cut: list[str] = []
    description = bounded_text(record, "product_description", cut, required=True)
    reason = bounded_text(record, "reason_for_recall", cut)
    firm = bounded_text(record, "recalling_firm", cut)
    event_id = bounded_text(record, "event_id", cut)
    distribution = bounded_text(record, "distribution_pattern", cut)
    code_info = text_field(record, "code_info")
    more_code_info = text_field(record, "more_code_info")
    openfda = record.get("openfda")
    if openfda is not None and not isinstance(openfda, dict):
        raise Malformed(f"openfda should be an object, got {type(openfda).__name__}")
    initiated = parse_openfda_date(text_field(record, "recall_initiation_date", required=True),
                                   "recall_initiation_date")
    terminated = parse_openfda_date(text_field(record, "termination_date"), "termination_date")
    reported = parse_openfda_date(text_field(record, "report_date"), "report_date")
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
        attributes=attributes, valid_from=midnight(initiated), valid_to=midnight(terminated),
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
    set_id = text_field(record, "set_id", required=True)
    label_id = text_field(record, "id", required=True)
    try:
        version = int(text_field(record, "version", required=True))
    except ValueError:
        raise Malformed(f"version {record.get('version')!r} is not a number") from None
    effective = parse_openfda_date(text_field(record, "effective_time", required=True), "effective_time")
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
            source_ref=source_ref[:255], valid_from=midnight(effective), asserted_by=asserted_by,
        ))
    return set_id, version, claims
