"""Pharmacy abbreviations and truncations: what a pharmacy's system printed on a dispensing
("LOSART POT 50MG TAB", "HYDROCOD/APAP 5-325", "SMZ/TMP DS", "AMOX/K CLAV") spelled out, so that
drugs.identity can name its ingredients as a recall names them.

    spell_out(text, known_phrases) -> the text with every abbreviation of the table written out
    abbreviations_in(text, known_phrases) -> the table's entries a text uses (ambiguous ones too)
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
  never expanded; the note says which meanings. A longer cut of it (PREDNISO) is not read either.

Rules:
- Whole tokens only: a token is a run of letters and digits (spaces, slashes, hyphens, commas and any
  other punctuation separate), compared without case. "POT" is spelled out, "POTENCY" is not.
- An abbreviation of two tokens ("PCN VK", "K CL", "6-MP") is read before its single tokens.
- A phrase the vocabulary already knows that is longer than the table's abbreviation at the same word
  (a brand such as "PEG-Intron" or "Diovan HCT") is left as it is; at equal length the table wins, as
  it says how pharmacies use the words.
- A longer cut of a listed name reads as the listed name: "ATORVASTA" (longer than ATORVAST, still
  the beginning of atorvastatin) is atorvastatin. Only for `truncation` and `ingredient` entries, tokens
  of at least five letters that the vocabulary does not know as a word of their own, and only while the
  token is still the beginning of the expansion: "DOXYLAMINE" begins with DOXY but is not the
  beginning of doxycycline, so it is left alone.
- No other truncation is guessed. Completing any token of five letters or more that begins exactly one
  ingredient name of the vocabulary was measured on the recall texts and not adopted: it read "Single
  use" as singlet oxygen and "Borneo" as borneol (docs/drug-identity.md, bench/abbreviations.py).

Dispensing text only. Recall subjects are read from FDA's text by drugs.identity.resolve and never pass
through here: a change of subject would re-version every fact it touches (docs/drug-identity.md).
"""

import csv
import functools
import re
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

TABLE_PATH = Path(__file__).resolve().parent / "data" / "pharmacy_abbreviations.csv"
KINDS = frozenset({"salt", "ingredient", "truncation", "form", "product", "word", "ambiguous"})
COLUMNS = ("abbreviation", "expansion", "kind", "note")
MIN_CUT = 5  # letters of a longer cut of a listed name
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


def _abbreviation_at(words: list[str], start: int, known_phrases: Container[str]) -> tuple[int, Abbreviation | None]:
    entries = table()
    for length in range(min(_longest_abbreviation(), len(words) - start), 0, -1):
        entry = entries.get(" ".join(words[start:start + length]).upper())
        if entry is not None:
            return length, entry
    entry = None if words[start] in known_phrases else _longer_cut(words[start])
    return (1, entry) if entry else (0, None)


_CUT_KINDS = frozenset({"truncation", "ingredient"})


def _longer_cut(word: str) -> Abbreviation | None:
    """The entry whose name word is a longer cut of: it begins with the entry's abbreviation and is
    still the beginning of its expansion ("atorvasta" of ATORVAST, atorvastatin)."""
    if len(word) < MIN_CUT or not word.isalpha():
        return None
    entries = table()
    for length in range(len(word) - 1, 1, -1):
        entry = entries.get(word[:length].upper())
        if entry is not None:  # the longest listed beginning decides, an ambiguous one included
            return entry if entry.kind in _CUT_KINDS and entry.expansion.startswith(word) else None
    return None


def _reading(words: list[str], start: int, known_phrases: Container[str]) -> tuple[int, Abbreviation | None]:
    """(words read, the table entry they are, or None) at start: a longer phrase the vocabulary knows
    is read as it is; else the table's longest abbreviation; else one plain word."""
    known = _known_length(words, start, known_phrases)
    length, entry = _abbreviation_at(words, start, known_phrases)
    if known > length:
        return known, None
    return (length, entry) if entry is not None else (1, None)


def spell_out(text: str, known_phrases: Container[str] = (), kinds: Container[str] = KINDS) -> str:
    """text with each abbreviation of the given kinds written out in place; everything else (spacing,
    punctuation, strengths, words the table does not list) is kept as it was. known_phrases are the
    vocabulary's phrases (lower case, one space): a phrase found there that is longer than the table's
    abbreviation at the same word is kept ("PEG-Intron" is not "polyethylene glycol Intron")."""
    tokens = _tokens(text)
    words = [token.group().lower() for token in tokens]
    pieces: list[str] = []
    kept_until = 0
    position = 0
    while position < len(words):
        length, entry = _reading(words, position, known_phrases)
        if entry is not None and entry.expands and entry.kind in kinds:
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
        length, entry = _reading(words, position, known_phrases)
        if entry is not None:
            found.append(entry)
        position += length
    return found
