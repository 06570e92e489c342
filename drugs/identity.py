"""Drug identity: free text ("Losartan Potassium Tab. USP 50mg", "Diovan", "VALSARTAN AND
HYDROCHLOROTHIAZIDE") -> the sorted set of active ingredients, from a real offline vocabulary.

    resolve(text) -> Identity(key, ingredients, source, text)

`key` is the ingredient names joined with "+" ("amlodipine+hydrochlorothiazide+valsartan"); two
texts name the same medicine exactly when their keys are equal. Nothing is guessed: a text in which
the vocabulary finds no drug, or only words we know to be unreliable, resolves to key "" with source
"unresolved", and callers flag it for a person.

The vocabulary is `drug-named-entity-recognition` (DrugBank open data + MeSH + Wikipedia names:
brands, salts, synonyms and named combinations; see docs/drug-identity.md for why this one). We read
the lookup tables its finder publishes (`drugs_finder.drug_variant_to_canonical` and
`drug_canonical_to_data`, the ones its add_custom_drug_synonym / reset_drugs_data maintain) and match
whole words, longest phrase first, rather than call its `find_drugs`: that one looks at one- and
two-word spans only ("valsartan and hydrochlorothiazide" is three), and its options reach the network
for structures and OMOP ids, which we never turn on.
The package is imported on first use and the index built from it cached for the process and kept in
var/cache for the next process (vocabulary()): importing this module costs nothing, so test collection
and `manage.py` start-up stay fast.
"""

import functools
import hashlib
import importlib.metadata
import logging
import marshal
import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from django.conf import settings

from drugs import abbreviations

log = logging.getLogger(__name__)

VOCABULARY = "drug-named-entity-recognition"
SOURCE = "drug-ner"
UNRESOLVED = "unresolved"
# A dispensing text named only once its pharmacy abbreviations were spelled out (resolve_dispensed):
# said apart, so a pharmacist can see how a row was read.
ABBREVIATION_SOURCE = "pharmacy-abbreviation"

# Salt, ester and hydrate words folded off an ingredient name ("olmesartan medoxomil" -> "olmesartan"),
# never off a name whose first word is itself one of these ("potassium chloride", "sodium bicarbonate").
SALT_WORDS = frozenset(
    "sodium potassium calcium magnesium lithium zinc aluminum hydrochloride hcl hydrobromide dihydrochloride "
    "monohydrate dihydrate trihydrate hemihydrate sesquihydrate hydrate anhydrous besylate besilate maleate "
    "mesylate mesilate dimesylate succinate tartrate bitartrate citrate sulfate sulphate phosphate acetate "
    "fumarate hemifumarate bromide chloride medoxomil axetil cilexetil tosylate hyclate malate lactate gluconate "
    "nitrate oxalate pamoate propionate dipropionate valerate butyrate embonate estolate ethylsuccinate "
    "stearate palmitate decanoate enanthate cypionate napsylate xinafoate furoate monosodium disodium "
    "trisodium dipotassium acetonide etabonate hexahydrate pentahydrate heptahydrate decahydrate".split()
)

# One drug under two vocabulary keys (MeSH "Thyroxine" for levothyroxine sodium and Synthroid, DrugBank
# "Levothyroxine" for the plain word): the US adopted name wins, as FDA and pharmacies use it.
CANONICAL_ALIASES = {
    "thyroxine": "levothyroxine",
    "liothyronine sodium": "liothyronine",
    "salbutamol": "albuterol",
    "paracetamol": "acetaminophen",
}

# Brand names reused for a different product: the vocabulary knows the old one only. Checked first, as
# phrases, so "Zantac 360" (famotidine since 2020) is never read as "Zantac" (ranitidine).
PHRASE_OVERRIDES = {
    "zantac 360": ("famotidine",),
    "exforge hct": ("amlodipine", "hydrochlorothiazide", "valsartan"),
}

# Variants that match ordinary words of labels and pharmacy descriptions, or are too short to trust
# ("Vals 80 mg" is not valsartan). Measured on the openFDA bulk files; docs/drug-identity.md.
IGNORED_VARIANTS = frozenset(
    "vals water sterile water purified water oxygen air nitrogen carbon dioxide alcohol ethanol glycerin "
    "glycerol lactose sucrose starch talc gelatin cellulose mannitol sorbitol saline dextrose glucose "
    "tablet tablets capsule capsules oral gel cream ointment lotion solution spray patch kit "
    "strip strips blue green red white black gold silver iron copper "
    "rx only usp caps tabs extra ultra max plus forte relief care pain cold flu night day".split()
) | frozenset({"sterile water", "purified water", "carbon dioxide", "rx only", "water for", "water for injection",
              "cotton", "peppermint", "cherry", "honey", "mint", "ferrous", "vicks"})

# Dosage forms, routes and packaging: never part of an ingredient name.
FORM_WORDS = frozenset(
    "tablet tablets tab tabs capsule capsules cap caps caplet caplets patch patches injection injectable "
    "solution solutions suspension cream ointment gel lotion spray sprays drops powder vial vials bottle "
    "bottles syringe syringes oral topical ophthalmic nasal transdermal vaginal rectal usp extended release "
    "delayed er xr sr dr odt chewable film coated count ct pack blister carton bag kit insert inserts sublingual "
    "buccal liposomal liposome rdna origin".split()
)

_DESCRIPTIVE_WORDS = FORM_WORDS | {"only", "dose", "low", "high", "strength", "contraceptives", "contraceptive"}

# MeSH trees of classes and forms: D20 complex mixtures, D26 pharmaceutical preparations, D27 chemical
# actions and uses; E diagnostic and therapeutic techniques.
_CLASS_TREES = ("D20", "D26", "D27", "E")

# Words that end the naming part of a product description: what follows is firm, packaging and codes.
_NAMING_ENDS = re.compile(
    r"\b(manufactured|manufacturer|mfd|mfg|mfr|distributed|dist|marketed|packaged|repackaged|relabeled|"
    r"made\s+in|product\s+of|ndc|upc|lot|exp|rx\s+only)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")
_POSSESSIVE = re.compile(r"['\u2019]s\b")
_COMBINATION_SPLIT = re.compile(r"\s*/\s*|\s*,\s*(?:and\s+)?|\s+and\s+")
_MAX_PHRASE = 8


@dataclass(frozen=True)
class Identity:
    key: str                      # "amlodipine+valsartan"; "" when unresolved
    ingredients: tuple[str, ...]  # sorted
    source: str                   # "drug-ner" | "pharmacy-abbreviation" | "unresolved"
    text: str                     # the text that was resolved (the naming part of a description)

    @property
    def resolved(self) -> bool:
        return bool(self.key)

    @property
    def is_combination(self) -> bool:
        return len(self.ingredients) > 1


def _words(text: str) -> list[str]:
    # A possessive is not a word of the name: "Dr. Reddy's Amlodipine" must not read "s amlodipine"
    # (a variant of levamlodipine).
    return _WORD.findall(_POSSESSIVE.sub("", (text or "").lower()))


def fold_salt(name: str) -> str:
    """'losartan potassium' -> 'losartan'; 'potassium chloride' stays (the salt is the drug)."""
    words = name.split()
    while len(words) > 1 and words[-1] in SALT_WORDS and words[0] not in SALT_WORDS:
        words.pop()
    return " ".join(words)


def _is_class(name: str, data: dict) -> bool:
    """MeSH headings that are classes, uses or dosage forms rather than one substance ("histamine
    antagonists", "ophthalmic solutions", "sulfates"): never an ingredient. DrugBank entries are substances."""
    if data.get("drugbank_id"):
        return False
    trees = data.get("mesh_tree") or []
    if any(tree.startswith(_CLASS_TREES) for tree in trees):
        return True
    last = name.split()[-1] if name.split() else ""
    return bool(trees) and last.endswith("s") and not last.endswith(("ss", "us", "is", "os"))


@functools.lru_cache(maxsize=1)
def vocabulary() -> dict[str, tuple[str, ...]]:
    """Phrase (lower-case words joined by one space) -> sorted ingredient names. Loaded once per process,
    from the copy a process built before when it was built from the same vocabulary release and the same
    rules (this module's source): building it costs about 3 s of CPU (the package's import, then the
    index), reading the copy about 0.03 s -- paid by every worker, sweep, ingest and command that reads a
    drug name."""
    path = _vocabulary_copy_path()
    try:
        index = marshal.loads(path.read_bytes())
        if isinstance(index, dict):
            return index
    except (OSError, EOFError, ValueError, TypeError):
        pass  # none yet, or unreadable: built again and written below
    index = _build_vocabulary()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_bytes(marshal.dumps(index))
        os.replace(partial, path)  # whole or not at all: a process reading it meanwhile sees the old state
        for older in path.parent.glob("drug-vocabulary-*.marshal"):
            if older != path:  # an earlier release's or rules' copy: never read again
                older.unlink(missing_ok=True)
    except OSError:
        log.warning("drug vocabulary: could not keep a copy at %s; each process builds its own", path)
    return index


def _vocabulary_copy_path() -> Path:
    """var/cache/drug-vocabulary-<digest>.marshal: the digest names the vocabulary's release, this module's
    rules and the Python that wrote it (marshal's format is per Python version), so a change of any of
    them reads no stale copy."""
    digest = hashlib.sha256("\0".join([
        importlib.metadata.version(VOCABULARY), f"{sys.version_info[:2]}:{marshal.version}",
        Path(__file__).read_text(),
    ]).encode()).hexdigest()[:16]
    return Path(settings.VAR_DIR) / "cache" / f"drug-vocabulary-{digest}.marshal"


def _build_vocabulary() -> dict[str, tuple[str, ...]]:
    # A heavy dependency loaded on first use: the finder builds its tables (and a fuzzy-match index) on
    # import, about 2 s, which a process that never resolves a drug name does not pay.
    from drug_named_entity_recognition import drugs_finder  # noqa: PLC0415

    variant_to_canonical = drugs_finder.drug_variant_to_canonical
    canonical_to_data = drugs_finder.drug_canonical_to_data
    canonicals = set(canonical_to_data)

    def ingredient(name: str) -> str:
        words = _words(name)
        while len(words) > 1 and (words[-1] in FORM_WORDS or words[-1] in SALT_WORDS) and words[0] not in SALT_WORDS:
            words.pop()  # wiki-derived names such as "methylphenidate patch", "isotretinoin capsules"
        name = " ".join(words)
        name = CANONICAL_ALIASES.get(name, name)
        return CANONICAL_ALIASES.get(fold_salt(name), fold_salt(name))

    def ingredients_of(canonical: str) -> tuple[str, ...]:
        # A named combination ("valsartan/hydrochlorothiazide", "amlodipine and benazepril") splits into
        # its parts only when every part is itself a drug of the vocabulary; vaccines and antigens with
        # "/" in their names stay whole.
        parts = [p for p in _COMBINATION_SPLIT.split(canonical) if p]
        if len(parts) > 1 and all(p in canonicals or p in variant_to_canonical for p in parts):
            return tuple(sorted({ingredient(variant_to_canonical.get(p, [p])[0]) for p in parts}))
        return (ingredient(canonical),)

    index: dict[str, tuple[str, ...]] = {}
    # Canonical names are phrases too (the package lists "progesterone" as a drug but not as its own variant).
    pairs = [(name, [name]) for name in canonicals] + list(variant_to_canonical.items())
    for variant, targets in pairs:
        phrase = " ".join(_words(variant))
        if not phrase or phrase in IGNORED_VARIANTS or len(phrase) < 4 or not targets:
            continue
        words = phrase.split()
        if all(word in FORM_WORDS for word in words) or (len(words) == 1 and words[0] in SALT_WORDS):
            continue  # "sulfate", "patch": a salt or a dosage form alone names no drug ("sodium chloride" does)
        found = set()
        for target in targets:
            if not _is_class(target, canonical_to_data.get(target) or {}):
                found.update(ingredients_of(target))
        # Wikipedia-derived names that describe a product ("low dose aspirin", "progestin only norethindrone
        # oral contraceptives") are not ingredient names: the words around them find the ingredient instead.
        found = {name for name in found if not set(name.split()) & _DESCRIPTIVE_WORDS}
        if found:
            index[phrase] = tuple(sorted(found))
    for phrase, parts in PHRASE_OVERRIDES.items():
        index[phrase] = tuple(sorted(parts))
    return index


def naming_part(text: str) -> str:
    """The leading words that name the product: up to the first firm, packaging or code marker."""
    text = " ".join((text or "").split())
    marker = _NAMING_ENDS.search(text)
    return text[: marker.start()] if marker and marker.start() > 0 else text


def find_ingredients(text: str) -> tuple[str, ...]:
    """Every ingredient named in text, longest phrase first, whole words only."""
    index = vocabulary()
    words = _words(text)
    found: set[str] = set()
    position = 0
    while position < len(words):
        for length in range(min(_MAX_PHRASE, len(words) - position), 0, -1):
            hit = index.get(" ".join(words[position: position + length]))
            if hit:
                found.update(hit)
                position += length
                break
        else:
            position += 1
    return tuple(sorted(found))


@functools.lru_cache(maxsize=65536)
def resolve(text: str) -> Identity:
    """The identity of the medicine a text names. A product description is read up to its first firm,
    packaging or code words; a name with no drug the vocabulary knows is unresolved, not guessed."""
    naming = naming_part(text)
    ingredients = find_ingredients(naming)
    if not ingredients:
        return Identity("", (), UNRESOLVED, naming)
    return Identity("+".join(ingredients), ingredients, SOURCE, naming)


def is_identity_key(value: str) -> bool:
    """True when value is already a key (every part a vocabulary ingredient): lets stored keys pass."""
    if not value:
        return False
    known = _known_ingredients()
    return all(part in known for part in value.split("+"))


@functools.lru_cache(maxsize=1)
def _known_ingredients() -> frozenset[str]:
    return frozenset(part for parts in vocabulary().values() for part in parts)


# --- product identity: what a text names when the vocabulary knows no ingredient -----------------------

PRODUCT_PREFIX = "product:"
PRODUCT_SOURCE = "product-text"
_PRODUCT_WORDS_KEPT = 6
# Words that say nothing about which product it is: forms, packaging, units and filler.
_PRODUCT_FILLER = FORM_WORDS | SALT_WORDS | frozenset(
    "mg mcg g gm kg ml l oz iu u unit units meq percent and with of for in the a an to by per each x "
    "rx only otc homeopathic dietary supplement supplements natural formula brand generic".split())


def product_words(text: str) -> list[str]:
    """The words that name a product in free text, in order: the naming part (before firm, packaging and
    code words), lower case, without forms, units, pure numbers and filler ('HCG 10,000U/1ML INJ' ->
    ['hcg', '10000u', '1ml', 'inj'] less fillers -> ['hcg', '10000u', '1ml', 'inj'])."""
    words = _words(naming_part(text).replace(",", ""))
    return [w for w in words if w not in _PRODUCT_FILLER and not w.isdigit() and len(w) > 1]


def product_key(text: str) -> str:
    """'product:<words>' for a product the vocabulary cannot name (a homeopathic, kratom, a compounded
    injection), so a recall or a dispensing of it still has an identity that people can read; '' when
    the text has no naming words at all. Two texts of one product may give different keys: they are
    compared by `texts_agree`, never by key equality."""
    words = product_words(text)[:_PRODUCT_WORDS_KEPT]
    return PRODUCT_PREFIX + " ".join(words) if words else ""


def is_product_key(key: str) -> bool:
    return bool(key) and key.startswith(PRODUCT_PREFIX)


@functools.lru_cache(maxsize=65536)
def resolve_dispensed(text: str) -> Identity:
    """The identity of what a pharmacy dispensed: resolve() once its pharmacy abbreviations and cut
    names are spelled out (drugs.abbreviations: "LOSART POT 50MG TAB" -> losartan, "OXYCOD/APAP" ->
    acetaminophen+oxycodone, not acetaminophen alone), with source "pharmacy-abbreviation" when that
    changed the key. Dispensing text only: recall subjects are resolve() of FDA's words and never
    change with the table."""
    identity = resolve(text)
    spelled = abbreviations.spell_out(text, vocabulary())
    if spelled != text:
        expanded = resolve(spelled)
        if expanded.resolved and expanded.key != identity.key:
            identity = replace(expanded, source=ABBREVIATION_SOURCE)
    return _with_brand_hct(identity, text)


# "Benicar HCT", "Atacand HCT", "Lopressor HCT": a brand (or ingredient) named with HCT after it is its
# combination with hydrochlorothiazide; the vocabulary knows some such brands (Diovan HCT) and reads the rest as
# the brand's ingredient alone, which would match a single-ingredient recall and miss the combination's.
# HCT alone stays ambiguous (drugs.abbreviations): only after a name that resolved.
_HCT_AFTER_NAME = re.compile(r"(?i)\b[a-z]{3,}[\s-]+hctz?\b")
_HCTZ = "hydrochlorothiazide"


def _with_brand_hct(identity: Identity, text: str) -> Identity:
    if not identity.resolved or {_HCTZ, "hydrocortisone"} & set(identity.ingredients) or \
            not _HCT_AFTER_NAME.search(text or ""):
        return identity
    ingredients = tuple(sorted({*identity.ingredients, _HCTZ}))
    return replace(identity, key="+".join(ingredients), ingredients=ingredients, source=ABBREVIATION_SOURCE)


def identity_key(text: str, *fallbacks: str) -> tuple[str, str]:
    """(key, source) of what was dispensed: of the first text that resolves to ingredients, pharmacy
    abbreviations spelled out (resolve_dispensed); else the product key of the first text that has
    naming words ('product:...', source 'product-text', with MVI and the like spelled out so it reads
    as recalls print the product); else ('', 'unresolved')."""
    texts = [t for t in (text, *fallbacks) if t and t.strip()]
    for candidate in texts:
        identity = resolve_dispensed(candidate)
        if identity.resolved:
            return identity.key, identity.source
    for candidate in texts:
        key = product_key(abbreviations.spell_out(candidate, vocabulary(), kinds={"product"}))
        if key:
            return key, PRODUCT_SOURCE
    return "", UNRESOLVED


def _alphabetic(words) -> list[str]:
    return [w for w in words if any(c.isalpha() for c in w) and len(w) >= 3]


# Words many different products share: one of them in common says nothing about being the same product.
_CATEGORY_WORDS = frozenset(
    "sanitizer sanitizers sanitizing antiseptic antibacterial homeopathic relief formula advanced original "
    "natural organic extra strength maximum regular children childrens adult adults infant infants liquid "
    "softgel softgels cream drops lotion wipes topical vitamin vitamins supplement dietary energy enhancement "
    "sexual weight allergy cough sinus nasal daily health complete rapid release instant scented unscented "
    "alcohol ethyl isopropyl benzalkonium chloride moisturizing moisturizers aloe vera hand gel foam foaming wash "
    "soap scent scented free fresh clean clear care kids baby travel size bottle solution antimicrobial instant "
    "drug facts active ingredient ingredients sterile compounded compounding pharmacy medicine injectable "
    "injection vial multi dose single supplied product products super ultra complex water premium plus "
    "formula black white blue green purple label labeled brand".split())
_TRUNCATED_MIN = 5  # "losart" stands for "losartan"; "los" stands for nothing


def _naming_words(text: str) -> list[str]:
    """The naming words of a product text or key that can tell one product from another: alphabetic,
    three letters or more, no category word."""
    words = (text[len(PRODUCT_PREFIX):] if is_product_key(text) else " ".join(product_words(text))).split()
    return [word for word in _alphabetic(words) if word not in _CATEGORY_WORDS]


PRODUCT_NAMES_MAX, PRODUCT_NAME_MAX = 6, 120


def product_names(texts) -> list[str]:
    """The names a product is printed under, from its texts (a description, brand and generic names):
    each text's naming part (before firm, packaging and code words), spaces tidied, at most 120
    characters, duplicates (any case) once, at most six. A dispensing of a product the vocabulary cannot
    name is compared with a recall's (drugs.matching)."""
    names: list[str] = []
    for text in texts:
        name = " ".join(naming_part(text or "").split())[:PRODUCT_NAME_MAX].strip(" ,;")
        if name and name.lower() not in {n.lower() for n in names}:
            names.append(name)
    return names[:PRODUCT_NAMES_MAX]


def distinctive_first_word(text: str) -> str:
    """The first naming word of a product text or key that can stand for the product (not a category word
    such as "hand" or "ultra"), else ""."""
    words = _naming_words(text)
    return words[0] if words else ""


def texts_agree(a: str, b: str) -> bool:
    """Do two product texts (or product keys) name the same product? Their first distinctive naming
    words are the same (or one is the other cut short, as pharmacy systems print names: "losart" / "losartan"), the
    first naming word of one is a word of the other (a brand typed after its maker's name: "Boiron
    Arnicare" / "Arnicare Arnica Montana"), or they share two naming words. Category words that many
    products carry ("hand", "sanitizer", "sterile", "homeopathic") never count. Used only with an exact
    lot, or to propose a candidate to a pharmacist (drugs.matching); bench/product_text_match.py
    measures it on real recalls."""
    words_a, words_b = _naming_words(a), _naming_words(b)
    if not words_a or not words_b:
        return False
    first_a, first_b = words_a[0], words_b[0]
    if first_a == first_b:
        return True
    shorter, longer = sorted((first_a, first_b), key=len)
    if len(shorter) >= _TRUNCATED_MIN and longer.startswith(shorter):
        return True
    if (len(first_a) >= 4 and first_a in words_b) or (len(first_b) >= 4 and first_b in words_a):
        return True
    return len(set(words_a) & set(words_b)) >= 2


def readable(key: str) -> str:
    """A key as people read it: 'amlodipine+valsartan' -> 'amlodipine and valsartan',
    'product:hcg 10000u 1ml inj' -> 'HCG 10000U 1ML INJ' (never blank while the key is not)."""
    if is_product_key(key):
        return key[len(PRODUCT_PREFIX):].upper()
    return " and ".join(key.split("+"))
