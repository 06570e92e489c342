"""What a recall covers, as stored: the scope kinds, `LotScope` (what `parse_scope` returns), the JSON
shape kept in a recall fact's attributes["lot_scope"], and the part of it a fact's content hash carries."""

from __future__ import annotations

from dataclasses import dataclass, field

from drugs.lots import printed_lot

KINDS = ("lots", "all_lots", "all_lots_window")


LOT_SCOPE_VERSION = "4"  # part of recalls.record_fields.record_hash: a parser change re-reads every record once


class ScopeAttribute(dict):
    """attributes["lot_scope"] of a whole record: a plain JSON dict that can also hand each lot-level
    fact its own entry in O(1) (a record of 3,000 lots must not copy 3,000 entries into each of its
    3,000 facts, nor search the list 3,000 times)."""

    def for_lot(self, lot: str) -> dict:
        index = self.__dict__.get("_index")
        if index is None:
            index = {entry["lot"]: entry for entry in self["lots"]}
            self.__dict__["_index"] = index
        entry = index.get(lot, {"lot": lot, "expiry": None})
        narrowed = {k: (list(v) if isinstance(v, list) else v) for k, v in self.items() if k != "lots"}
        narrowed["lots"] = [dict(entry)]
        narrowed["uncertain"] = [text for text in self["uncertain"] if printed_lot(text) == lot]
        return narrowed


def stored_scope(attributes: dict, lot: str | None = None) -> dict:
    """A recall fact's lot scope, also for facts written before lot_scope existed (re-ingestion does not
    re-version facts whose meaning did not change, so those keep their old attributes)."""
    scope = (attributes or {}).get("lot_scope")
    if scope:
        return scope
    kind = "lots" if lot else "all_lots"
    return {"kind": kind, "lots": [{"lot": lot, "expiry": None}] if lot else [], "expiry_window": None,
            "dispensed_window": None, "manufactured_window": None, "truncated": False, "uncertain": []}


@dataclass(frozen=True)
class ScopedLot:
    lot: str  # as printed (drugs.lots.printed_lot); compared with dispensed lots by drugs.lots.canonical_lot
    expiry: str | None = None  # ISO "YYYY-MM" or "YYYY-MM-DD" as written next to the lot


@dataclass
class LotScope:
    kind: str
    lots: list[ScopedLot] = field(default_factory=list)
    expiry_window: tuple[str | None, str | None] | None = None
    dispensed_window: tuple[str | None, str | None] | None = None
    manufactured_window: tuple[str | None, str | None] | None = None
    truncated: bool = False
    uncertain: list[str] = field(default_factory=list)
    says_all_lots: bool = False  # the text itself says every lot (not just: no lot found)

    @property
    def lot_numbers(self) -> list[str]:
        return [entry.lot for entry in self.lots]

    @property
    def has_window(self) -> bool:
        return any(w is not None for w in (self.expiry_window, self.dispensed_window, self.manufactured_window))

    def as_attribute(self) -> ScopeAttribute:
        """The JSON shape stored in a recall fact's attributes["lot_scope"] (docs/lots.md)."""
        attribute = ScopeAttribute(self._flags_and_windows())
        attribute["lots"] = [{"lot": e.lot, "expiry": e.expiry} for e in self.lots]
        return attribute

    def _flags_and_windows(self) -> dict:
        return {
            "kind": self.kind,
            "lots": [],
            "expiry_window": list(self.expiry_window) if self.expiry_window else None,
            "dispensed_window": list(self.dispensed_window) if self.dispensed_window else None,
            "manufactured_window": list(self.manufactured_window) if self.manufactured_window else None,
            "truncated": self.truncated,
            "uncertain": list(self.uncertain),
        }


def scope_terms(lot_scope: dict | None) -> dict | None:
    """The part of a stored lot_scope that changes who a fact can touch, for its content hash: None for
    scopes that mean what a fact without lot_scope meant (a named lot; every lot), so adding the structured
    scope to existing facts does not re-version them; otherwise the kind, windows and uncertain flags."""
    if not lot_scope:
        return None
    terms = {k: lot_scope.get(k) for k in ("expiry_window", "dispensed_window", "manufactured_window")
             if lot_scope.get(k)}
    if lot_scope.get("uncertain"):
        terms["uncertain"] = sorted(lot_scope["uncertain"])
    if not terms:
        return None
    terms["kind"] = lot_scope.get("kind")
    return terms
