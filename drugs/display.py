"""The name a patient reads for a product: the naming part of a label's product description.

    display_name("Losartan Potassium Tablets USP 50 mg 90 count bottles Manufactured by ...")
        -> "Losartan Potassium Tablets 50 mg"

A recall's `product_description` runs on from the product into its packaging, its labeler and its
codes ("..., 90-count bottles, Rx Only, Manufactured by: ..., NDC 00378-5814-77"). A patient is told
the product only: the words before the first firm, code or packaging words, with the strength, in
clean case (a label printed in capitals or tall-man letters, "metFORMIN", reads "Metformin"), never a
count, a fill volume, a container, a labeler, an address or an NDC. What the product is stays the
label's own words: nothing is looked up or guessed. A text with no naming words left gives "" (the
caller names the product another way, e.g. drugs.identity.readable of its identity key).

Statements of recall facts keep drugs.recall_terms.short_product (their wording is hashed into the
fact's content: changing it would re-version every fact); what a patient reads is built with this.
"""

import functools
import re

MAX_LENGTH = 80

# Where the naming part ends: labeler, firm, codes, prescription status, handling. Case-insensitive.
_LABELER = re.compile(
    r"\b(?:manufactured|manufacturer|mfd|mfg|mfr|distributed|distributor|dist\.|marketed|packaged|packed|"
    r"repackaged|relabeled|relabelled|compounded|prepared\s+(?:by|for)|made\s+(?:in|by|for)|product\s+of|"
    r"ndc|upc|sku|gtin|item\s*(?:#|no|number|:)|service\s+code|lot|lots|exp|expiry|expiration|"
    r"rx\s+only|barcode|www\.|https?:|supplied\s+(?:in|as)|contained\s+in|for\s+prescription\s+compounding|"
    r"this\s+rx|refrigerate|each\s+(?:bottle|box|vial|carton|pack|package|kit|tube))\b|---|"
    r"(?:^|\s)\(?[a-e]\.?\)(?=[\s.\d])|\b(?:total\s+)?volume\b",
    re.IGNORECASE)
# Packaging that follows the product inside its own words: a count, a pack of, a container it comes in.
_PACKAGING = re.compile(
    r"(?<![-\w.,])\d[\d,.]*\s*-?\s*(?:count|ct\b\.?|pk\b|pack\b|packs\b|each\b|tablets?\s+per|capsules?\s+per|"
    r"(?:tablets|capsules|caplets|softgels|gelcaps|lozenges|packets|sachets|strips)\b)|"
    r"(?<![-\w])(?:\d[\d.,]*\s*(?:ml|l|g|gm|grams?|mg|oz)?\s*-?\s*)?(?:(?:single|multi)[\s-]?dose\s+|glass\s+|plastic\s+|amber\s+|"
    r"prefilled\s+|sdv\s+|mdv\s+|flip[\s-]top\s+)*(?:bottles?|vials?|bags?|blisters?|cartons?|pouch(?:es)?|drums?|"
    r"jars?|tubes?|ampoules?|ampules?|canisters?)\b|(?:for\s+)?single[\s-]use\b|"
    r"\b\d[\d,.]*\s*[xX]\s*\d|"
    r"\b(?:in|per)\s+(?:an?\s+|the\s+)?(?:[\w-]+\s+){0,4}?(?:bottles?|vials?|bags?|containers?|cartons?|boxe?s?|"
    r"blisters?|pouch(?:es)?|jars?|tubes?|drums?|ampoules?|ampules?|syringes?|cans?|canisters?|kits?)\b|"
    r"\bbulk\s+container\b|\bsingle[\s-]dose\b|\bmulti[\s-]?dose\b|\bunit[\s-]dose\b|\bunit\s+size\b|"
    r"\b\d+\s+days?\s+supply\b",
    re.IGNORECASE)
# A fill volume (not a concentration: "10 mg/mL", "40 mg/5 mL" stay): "50 mL", "12 FL OZ", "1 L".
_FILL = re.compile(r"(?<![/\d.,])(?<!/\s)(?<!per\s)\b\d[\d,.]*\s*-?\s*"
                   r"(?:ml|l|cc|fl\.?\s*oz\.?|oz\.?|liters?|litres?|gallons?)\b", re.IGNORECASE)
# A segment that names a firm or an address: the labeler, whatever words introduce it.
_FIRM = re.compile(
    r"\b(?:inc|llc|l\.l\.c|ltd|limited|corp|corporation|co\.|company|gmbh|s\.a|pharmacy|pharmacies|"
    r"pharmaceuticals?|pharma|laboratories|labs?|compounding|compounder|services?|health\s*care|healthcare|"
    r"street|st\.|road|rd\.|avenue|ave\.?|drive|dr\.?\s*$|blvd|suite|ste\.?|usa|china|india|canada)\b|"
    r"\b[A-Z]{2}\s+\d{5}\b|\b\d{3}[-.\s]\d{3}[-.\s]\d{4}\b", re.IGNORECASE)
# A firm named first ("Strides Pharma Inc.Potassium Chloride ..."): its name and suffix in the first words.
_FIRM_FIRST = re.compile(r"^(?:[\w&'.,-]+\s+){0,3}?(?:inc|llc|ltd|healthcare|pharmaceuticals?|laboratories)\b\.?"
                         r"(?:\s+(?:US|USA|America)\b)?", re.IGNORECASE)
# Words that are not the product's name: compendial marks, status and handling.
_NOISE = re.compile(r"\b(?:USP|NF|HPUS|Rx|OTC|sterile|non-sterile|preservative[\s-]free|sulfite[\s-]free)\b",
                    re.IGNORECASE)
_STRENGTH = re.compile(r"^\s*[\d.,/\s]+(?:%|mg|mcg|µg|g|gm|gram|grams|grain|grains|iu|units?|u|meq|mmol|mg/ml|"
                       r"mcg/ml|units?/ml)\b", re.IGNORECASE)
_FORM_ONLY = re.compile(r"^\s*(?:extended[\s-]release\s+|delayed[\s-]release\s+|orally\s+disintegrating\s+|"
                        r"chewable\s+|film[\s-]coated\s+)?(?:tablets?|capsules?|caplets?|injection|injectable|"
                        r"solution|suspension|cream|ointment|gel|lotion|drops|powder|syrup|elixir|spray|patch(?:es)?|"
                        r"for\s+injection|for\s+oral\s+suspension)\s*$", re.IGNORECASE)
# A sentence ends the name ("Medline Concordia Trunk Kit. Packaged for ..."), not an abbreviation's period.
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)])\.\s+(?=[A-Z0-9])", re.IGNORECASE)
_ABBREVIATIONS = frozenset("dr st mt jr sr no co inc ltd vs oz fl tab tabs cap caps inj soln susp approx".split())
_TALL_MAN = re.compile(r"^(?:[a-z]+[A-Z]{3,}[a-z]*|[A-Z]{3,}[a-z]{2,})$")
_UNITS = {"MG": "mg", "MCG": "mcg", "ML": "mL", "GM": "g", "KG": "kg", "MEQ": "mEq", "IU": "IU"}
_ACRONYMS = {name.upper(): name for name in (
    "HCl HBr ER XR XL SR DR CR LA ODT DM PF PE MDV SDV IV IM SC HCG CBD PSE MIC UAC ANSI USCG EDTA DHEA GHRP PGE "
    "BPC NAD TPN DMSO APAP ASA NS LET HP HC PM AM EC DS CD").split()}
_TRAILING = re.compile(r"[\s,;:/\-–&+(.#]+$|\s+(?:and|or|in|with|of|for|per|by|the|a|an|as|to)$", re.IGNORECASE)


def _first_sentence(text: str) -> str:
    for found in _SENTENCE_END.finditer(text):
        word = re.findall(r"[A-Za-z]+$", text[: found.start()])
        if not word or word[0].lower() not in _ABBREVIATIONS and len(word[0]) > 2:
            return text[: found.start()]
    return text


def _segments(text: str) -> list[str]:
    """Split at commas and semicolons outside parentheses."""
    parts, depth, current = [], 0, []
    for position, char in enumerate(text):
        depth += char == "("
        depth -= char == ")" and depth > 0
        # "1,000 mcg", "2,3-Dimercaptosuccinic acid": a comma between digits is part of the name.
        numeric = char == "," and text[position - 1: position].isdigit() and text[position + 1: position + 2].isdigit()
        if char in ",;" and depth == 0 and not numeric:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [" ".join(p.split()) for p in parts]


def _cut(segment: str, pattern: re.Pattern) -> str:
    found = pattern.search(segment)
    return segment[: found.start()] if found else segment


def _tidy(segment: str) -> str:
    segment = _NOISE.sub(" ", segment).replace("*", " ")
    segment = re.sub(r"[\s,;]+\)", ")", segment)
    segment = re.sub(r"\(\s*[\d\s\-]*\)|\(\s*\)", " ", segment)  # emptied or code-only parentheses
    if segment.count("(") > segment.count(")"):
        segment = segment[: segment.rfind("(")]  # a parenthesis the cut left open
    segment = " ".join(segment.split())
    while True:
        tidied = _TRAILING.sub("", segment).strip()
        if tidied == segment:
            return tidied
        segment = tidied


def _clean_case(text: str) -> str:
    """Capitals and tall-man letters read as a name: "IRBESARTAN" -> "Irbesartan", "metFORMIN" ->
    "Metformin", "250 MG/ML" -> "250 mg/mL"; short capitals are kept (acronyms: "HCG", "ODT", "PF")."""
    letters = [c for c in text if c.isalpha()]
    shouting = bool(letters) and sum(c.isupper() for c in letters) / len(letters) > 0.7

    def run(found: re.Match) -> str:
        word = found.group(0)
        before = text[found.start() - 1: found.start()]
        if word.upper() in _UNITS and (before.isdigit() or before in "/ ") and word.upper() != word.capitalize():
            return _UNITS[word.upper()]
        if word.isupper() and word in _ACRONYMS:
            return _ACRONYMS[word]
        if _TALL_MAN.match(word) or (word.isupper() and len(word) >= (3 if shouting else 5)):
            return word.capitalize()
        return word

    text = re.sub(r"[A-Za-z]+", run, text)
    return text[:1].upper() + text[1:]


def _leading_words_dropped(text: str) -> str:
    """A description that opens with its labeler, a code or a pack ("Distributed by: DocRx, Methylprednisolone
    Tablets ...", "NDC 64380-721-06 TACROLIMUS CAPSULES ...", "Unit Dose Valsartan Tablets ..."): those
    words dropped, so the product that follows is read."""
    for _ in range(3):
        found = _LABELER.match(text) or _PACKAGING.match(text) or _FILL.match(text) or _FIRM_FIRST.match(text)
        if not found:
            return text
        rest = text[found.end():]
        if re.match(r"\s*(?:by|for)\b", rest, re.IGNORECASE):  # a firm's name follows, to the first comma
            rest = rest.split(",", 1)[1] if "," in rest else ""
        text = re.sub(r"^[\s:#.,-]*(?:[\d-]{6,}\s*)?", "", rest)
    return text


def _firm_dropped(text: str, firm: str) -> str:
    """The recalling firm's own words at the start ("Solco Healthcare US Valsartan ..." by Solco Healthcare
    US, LLC) are its name, not the product's."""
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", firm or "")} - {"and", "of", "the"}
    if not words:
        return text
    found = re.match(r"^(?:[^\w]*(?:" + "|".join(map(re.escape, sorted(words))) + r")\b[.,]*\s*)+", text,
                     re.IGNORECASE)
    rest = text[found.end():] if found else text
    return rest if re.search(r"[A-Za-z]{3}", rest) else text


@functools.lru_cache(maxsize=8192)
def display_name(text: str, firm: str = "") -> str:
    """The product a description names, as a patient should read it ("" when no naming words are left).
    `firm`: the recalling firm, whose name is dropped where the description opens with it."""
    text = " ".join((text or "").replace("\u00a0", " ").split())
    if firm:
        # "Bethel 30 capsules" by Bethel Inc: the firm's name is the product's, when nothing else names it.
        return _named(_firm_dropped(text, firm)) or _named(text)
    return _named(text)


def _named(text: str) -> str:
    text = re.sub(r"\[[^\]]*\]?", " ", text)  # bracketed ingredient lists ("[Calcarea Phosphorica 6X, ...]")
    text = _first_sentence(_cut(_leading_words_dropped(text), _LABELER))
    kept: list[str] = []
    for index, segment in enumerate(_segments(text)):
        packed = min((m for m in (_PACKAGING.search(segment), _FILL.search(segment)) if m),
                     key=lambda m: m.start(), default=None)
        if index and (_FIRM.search(segment) or (packed and packed.start() == 0)):
            break
        named = _tidy(segment[: packed.start()] if packed else segment)
        if named:
            kept.append(named)
        if packed or len(kept) == 3:
            break
    name, previous = "", ""
    for segment in kept:
        # "Valsartan Tablets" + "160 mg" reads "Valsartan Tablets 160 mg"; two strengths keep their comma.
        spaced = (_STRENGTH.match(segment) and not _STRENGTH.match(previous)) or _FORM_ONLY.match(segment)
        joined = f"{name} {segment}" if spaced else f"{name}, {segment}"
        if name and len(joined) > MAX_LENGTH:
            break
        name, previous = (joined if name else segment), segment
    if len(name) > MAX_LENGTH:
        name = name[: name.rfind(" ", 0, MAX_LENGTH)] if " " in name[:MAX_LENGTH] else name[:MAX_LENGTH]
        name = _tidy(name)
    return _clean_case(name) if re.search(r"[A-Za-z]", name) else ""
