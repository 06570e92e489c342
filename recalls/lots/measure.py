"""Score recalls.lots.parse.parse_scope against a hand-labelled evaluation split (recalls/data/lots_eval.json).

Lots are micro-averaged over every case whose lots were labelled in full (compared after
`printed_lot`); the few texts too long to transcribe by hand (the 32,600-character truncated
record, lists of 300-900 lots) carry spot checks instead: lots that must be found and fragments
that must not. Scope kind is scored on every case; expiry on every true-positive lot that has a
labelled expiry; windows on every labelled window (a window labelled [null, null] is "within expiry":
it must be read as a window with both ends open), expiry windows also on their own.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from drugs.lots import printed_lot

from .parse import parse_scope

# Drawn by bench/lots_split.py and labelled by hand before the parser was written; never used to change it.
EVALUATION_SPLIT = Path(__file__).resolve().parent.parent / "data" / "lots_eval.json"


@dataclass
class Report:
    cases: int = 0
    lot_cases: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    kind_right: int = 0
    expiry_checked: int = 0
    expiry_right: int = 0
    windows_checked: int = 0
    windows_right: int = 0
    expiry_windows_checked: int = 0
    expiry_windows_right: int = 0
    truncated_right: int = 0
    spot_checks: int = 0
    spot_failures: int = 0
    errors: list = field(default_factory=list)  # (recall_number, what, detail, text excerpt)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def kind_accuracy(self) -> float:
        return self.kind_right / self.cases if self.cases else 1.0

    def summary(self) -> str:
        return (f"{self.cases} strings ({self.lot_cases} with every lot labelled, {self.tp + self.fn} lots): "
                f"lot precision {self.precision:.4f} (TP {self.tp}, FP {self.fp}), recall {self.recall:.4f} "
                f"(FN {self.fn}); scope kind accuracy {self.kind_accuracy:.4f} ({self.kind_right}/{self.cases}); "
                f"expiry {self.expiry_right}/{self.expiry_checked}; "
                f"windows {self.windows_right}/{self.windows_checked} "
                f"(expiry windows {self.expiry_windows_right}/{self.expiry_windows_checked}); "
                f"truncated flag {self.truncated_right}/{self.cases}; "
                f"spot checks {self.spot_checks - self.spot_failures}/{self.spot_checks}")


def _excerpt(text: str, needle: str | None = None, width: int = 70) -> str:
    flat = " ".join(text.split())
    if needle:
        at = flat.upper().replace(" ", "").find(needle)
        if at < 0:
            at = flat.upper().find(needle[:4])
        if at >= 0:
            start = max(0, at - width)
            return ("…" if start else "") + flat[start:at + width] + "…"
    return flat[:2 * width] + ("…" if len(flat) > 2 * width else "")


def score(cases: list[dict]) -> Report:
    report = Report()
    for case in cases:
        report.cases += 1
        scope = parse_scope(case["code_info"], case.get("more_code_info") or "")
        text = case["code_info"] + " " + (case.get("more_code_info") or "")
        rn = case["recall_number"]
        if scope.kind == case["kind"]:
            report.kind_right += 1
        else:
            report.errors.append((rn, "kind", f"labelled {case['kind']}, parsed {scope.kind}", _excerpt(text)))
        if scope.truncated == case.get("truncated", False):
            report.truncated_right += 1
        else:
            report.errors.append((rn, "truncated", f"labelled {case.get('truncated')}, parsed {scope.truncated}",
                                  _excerpt(text)))
        found = {e.lot: e for e in scope.lots}
        if case.get("lots_labelled", True):
            report.lot_cases += 1
            expected = {}
            for entry in case["lots"]:
                expected.setdefault(printed_lot(entry["lot"]), entry.get("expiry"))
            for lot in sorted(set(found) - set(expected)):
                report.fp += 1
                report.errors.append((rn, "FP", lot, _excerpt(text, lot)))
            for lot in sorted(set(expected) - set(found)):
                report.fn += 1
                report.errors.append((rn, "FN", lot, _excerpt(text, lot)))
            for lot in set(found) & set(expected):
                report.tp += 1
                if expected[lot]:
                    report.expiry_checked += 1
                    if found[lot].expiry == expected[lot]:
                        report.expiry_right += 1
                    else:
                        report.errors.append((rn, "expiry", f"{lot}: labelled {expected[lot]}, parsed "
                                                            f"{found[lot].expiry}", _excerpt(text, lot)))
        else:
            for lot in case.get("must_include", []):
                report.spot_checks += 1
                if printed_lot(lot) not in found:
                    report.spot_failures += 1
                    report.errors.append((rn, "spot FN", lot, _excerpt(text, printed_lot(lot))))
            for lot in case.get("must_exclude", []):
                report.spot_checks += 1
                if printed_lot(lot) in found:
                    report.spot_failures += 1
                    report.errors.append((rn, "spot FP", lot, _excerpt(text, printed_lot(lot))))
        for name in ("expiry_window", "dispensed_window", "manufactured_window"):
            labelled = case.get(name)
            if labelled is None:
                continue
            report.windows_checked += 1
            report.expiry_windows_checked += name == "expiry_window"
            parsed = list(getattr(scope, name)) if getattr(scope, name) else None
            if parsed == labelled:
                report.windows_right += 1
                report.expiry_windows_right += name == "expiry_window"
            else:
                report.errors.append((rn, name, f"labelled {labelled}, parsed {parsed}", _excerpt(text)))
    return report


def load_cases(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text())["cases"]
