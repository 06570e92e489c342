"""Pharmacy abbreviations and truncations: what a pharmacy's system printed on a dispensing
("LOSART POT 50MG TAB", "HYDROCOD/APAP 5-325", "SMZ/TMP DS", "AMOX/K CLAV") spelled out, so that
drugs.identity can name its ingredients as a recall names them.

    spell_out(text, known_phrases) -> the text with every abbreviation of the table written out
    Truncations(names, ignored).complete(text) -> the text with each truncated name completed, or None
    table() -> {abbreviation: Abbreviation}

The table is `drugs/data/pharmacy_abbreviations.csv` (abbreviation, expansion, kind, note), curated
from pharmacy usage; the note says where an entry comes from. Kinds:

- `salt`: a salt or ester word (POT, HCL, BESY, SUCC, TART, MAL, CIT, SULF, MES, ...), spelled as USP
  names it, so identity folds it off the name as it folds "potassium" off "losartan potassium".
- `ingredient`: a drug (HCTZ, APAP, ASA, KCL, NTG, SMX, TMP, MTX, "PCN VK", ...).
- `truncation`: a generic name cut to fit a label (LOSART, ATORVAST, LEVOTHYROX, METOPROL, ...).
- `form`: a release or dosage form, route or package word (ER, XL, SR, DR, EC, ODT, DS, SL, ...): never
  an ingredient.
- `product`: a product the vocabulary names no ingredient for (MVI, PNV): spelled out so its product
  key reads as recalls print it (MULTIVITAMIN).
- `word`: a word that only helps the next one (VIT, as in VIT D3).
- `ambiguous`: an abbreviation with two meanings in pharmacy use (MS, MSO4, HCT, INH, LEVO, NITRO, ...):
  never expanded; the note says which meanings. Listing it keeps it out of the truncation rule too.

Rules:
- Whole tokens only: a token is a run of letters and digits (spaces, slashes, hyphens, commas and any
  other punctuation separate), compared without case. "POT" is spelled out, "POTENCY" is not.
- An abbreviation of two tokens ("PCN VK", "K CL", "6-MP") is read before its single tokens.
- A phrase the vocabulary already knows (a brand such as "PEG-Intron" or "Diovan HCT") is left as it
  is: the table never rewrites words the vocabulary reads better.
- A truncation the table does not list is completed only by `Truncations`: a token of at least
  five letters that is the beginning of exactly one ingredient name of the vocabulary, is not itself a
  word of any ingredient name and is not a form, salt or filler word. drugs.identity calls it only when
  the text, once spelled out, names no ingredient at all.

Dispensing text only. Recall subjects are read from FDA's text by drugs.identity.resolve and never pass
through here: a change of subject would re-version every fact it touches (docs/drug-identity.md).
"""

import bisect
import csv
import functools
import re
from collections.abc import Container, Iterable
from dataclasses import dataclass
from pathlib import Path

TABLE_PATH = Path(__file__).resolve().parent / "data" / "pharmacy_abbreviations.csv"
KINDS = frozenset({"salt", "ingredient", "truncation", "form", "product", "word", "ambiguous"})
COLUMNS = ("abbreviation", "expansion", "kind", "note")
MIN_TRUNCATION = 5
_MAX_KNOWN_PHRASE = 8  # as drugs.identity reads phrases

_TOKEN = re.compile(r"[A-Za-z0-9]+")
_ABBREVIATION = re.compile(r"[A-Z0-9]+( [A-Z0-9]+)*")
_EXPANSION = re.compile(r"[a-z0-9]+( [a-z0-9]+)*")


@dataclass(frozen=True)
class Abbreviation:
    abbreviation: str  # upper case, tokens joined by one space: "PCN VK"
    expansion: str     # lower case: "penicillin v potassium"; "" when ambiguous
    kind: str
    note: str

    @property
    def expands(self) -> bool:
        return self.kind != "ambiguous"


class TableError(ValueError):
    """A row of the abbreviation table that cannot be used; the message names the file and line."""


def parse_table(lines, source: str = str(TABLE_PATH)) -> dict[str, Abbreviation]:
    """The rows of a table as CSV lines, checked: a bad row raises TableError naming its line, so a
    maintainer's mistake stops the first lookup instead of silently expanding nothing or the wrong thing."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if tuple(header or ()) != COLUMNS:
        raise TableError(f"{source}:1: the header must be {','.join(COLUMNS)}, not {header!r}")
    rows: dict[str, Abbreviation] = {}
    for number, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != len(COLUMNS):
            raise TableError(f"{source}:{number}: {len(row)} columns, expected {len(COLUMNS)}: {row!r}")
        entry = Abbreviation(*(value.strip() for value in row))
        if entry.kind not in KINDS:
            raise TableError(f"{source}:{number}: kind {entry.kind!r} is not one of {', '.join(sorted(KINDS))}")
        if not _ABBREVIATION.fullmatch(entry.abbreviation):
            raise TableError(f"{source}:{number}: abbreviation {entry.abbreviation!r} must be upper-case "
                             "letters and digits, tokens separated by one space")
        if entry.expands != bool(entry.expansion):
            raise TableError(f"{source}:{number}: {entry.abbreviation}: an ambiguous entry has no expansion "
                             "and every other entry has one")
        if entry.expansion and not _EXPANSION.fullmatch(entry.expansion):
            raise TableError(f"{source}:{number}: expansion {entry.expansion!r} must be lower-case words")
        if not entry.note:
            raise TableError(f"{source}:{number}: {entry.abbreviation}: say where the entry comes from")
        if entry.abbreviation in rows:
            raise TableError(f"{source}:{number}: {entry.abbreviation} is listed twice")
        rows[entry.abbreviation] = entry
    return rows


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Abbreviation]:
    """The maintained table, read once per process."""
    with TABLE_PATH.open(newline="", encoding="utf-8") as handle:
        return parse_table(handle)


@functools.lru_cache(maxsize=1)
def _longest_abbreviation() -> int:
    return max(len(abbreviation.split()) for abbreviation in table())


def _tokens(text: str) -> list[re.Match]:
    return list(_TOKEN.finditer(text or ""))


def _known_length(words: list[str], start: int, known_phrases: Container[str]) -> int:
    """Words of the longest phrase of two or more words the vocabulary knows at start (0: none)."""
    for length in range(min(_MAX_KNOWN_PHRASE, len(words) - start), 1, -1):
        if " ".join(words[start:start + length]) in known_phrases:
            return length
    return 0


def _abbreviation_at(words: list[str], start: int) -> tuple[int, Abbreviation | None]:
    entries = table()
    for length in range(min(_longest_abbreviation(), len(words) - start), 0, -1):
        entry = entries.get(" ".join(words[start:start + length]).upper())
        if entry is not None:
            return length, entry
    return 0, None


def spell_out(text: str, known_phrases: Container[str] = (), kinds: Container[str] = KINDS) -> str:
    """text with each abbreviation of the given kinds written out in place; everything else (spacing,
    punctuation, strengths, words the table does not list) is kept as it was. known_phrases are the
    vocabulary's phrases (lower case, one space): a phrase of two or more words found there is kept."""
    tokens = _tokens(text)
    words = [token.group().lower() for token in tokens]
    pieces: list[str] = []
    kept_until = 0
    position = 0
    while position < len(words):
        known = _known_length(words, position, known_phrases)
        if known:
            position += known
            continue
        length, entry = _abbreviation_at(words, position)
        if not length:
            position += 1
            continue
        if entry.expands and entry.kind in kinds:
            start, end = tokens[position].start(), tokens[position + length - 1].end()
            pieces += [text[kept_until:start], entry.expansion]
            kept_until = end
        position += length
    return "".join(pieces) + text[kept_until:] if pieces else text


def abbreviations_in(text: str, known_phrases: Container[str] = ()) -> list[Abbreviation]:
    """The table's entries text uses, in order, ambiguous ones included (to show a pharmacist why a
    row was read as it was, or why an abbreviation was left as typed)."""
    words = [token.group().lower() for token in _tokens(text)]
    found = []
    position = 0
    while position < len(words):
        known = _known_length(words, position, known_phrases)
        if known:
            position += known
            continue
        length, entry = _abbreviation_at(words, position)
        if entry is not None:
            found.append(entry)
        position += length or 1
    return found


class Truncations:
    """Completes names cut to fit a label, against the ingredient names of the vocabulary.

    A token is a truncation when it has at least five letters and no digit, is not in the table (listed
    abbreviations and ambiguous ones are decided there), is not an ignored word (forms, salts, filler),
    is not itself a word of any ingredient name ("orange" of "orange oil" is a word, not a cut name),
    and begins exactly one name."""

    def __init__(self, names: Iterable[str], ignored: Container[str] = ()):
        self.names = sorted(set(names))
        self.name_words = frozenset(word for name in self.names for word in name.split())
        self.ignored = ignored

    def completion(self, token: str) -> str | None:
        """The one ingredient name token is a truncation of, else None."""
        token = token.lower()
        if (len(token) < MIN_TRUNCATION or not token.isalpha() or token.upper() in table()
                or token in self.ignored or token in self.name_words):
            return None
        first = bisect.bisect_left(self.names, token)
        matches = [name for name in self.names[first:first + 2] if name.startswith(token)]
        return matches[0] if len(matches) == 1 else None

    def complete(self, text: str) -> str | None:
        """text with every truncated name completed, or None when no token is one. Callers use it only
        for a text that names no ingredient once spelled out."""
        pieces: list[str] = []
        kept_until = 0
        for token in _tokens(text):
            name = self.completion(token.group())
            if name:
                pieces += [text[kept_until:token.start()], name]
                kept_until = token.end()
        return "".join(pieces) + text[kept_until:] if pieces else None
