"""Every CSV file the product writes goes through core.exports.csv_writer, which neutralises cells a
spreadsheet would run as a formula: no product module builds its own csv.writer or csv.DictWriter."""

import ast
from pathlib import Path

from tests.paths import PROJECT_DIR as PROJECT

NOT_PRODUCT = {"tests", "bench", "migrations", ".venv", "node_modules", "var"}
THE_ONE_HOME = Path("core/exports.py")
WRITERS = {"writer", "DictWriter"}


def own_csv_writers(root: Path) -> list[str]:
    """'path:line' of each csv.writer / csv.DictWriter (or a `from csv import` of them) outside core.exports."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if (relative == THE_ONE_HOME or NOT_PRODUCT & set(relative.parts[:-1])
                or any(part.startswith(".") for part in relative.parts)):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr in WRITERS
                    and isinstance(node.value, ast.Name) and node.value.id == "csv"):
                found.append(f"{relative}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and node.module == "csv" and {
                    alias.name for alias in node.names} & WRITERS:
                found.append(f"{relative}:{node.lineno}")
    return found


def test_no_product_module_writes_csv_but_through_core_exports():
    offenders = own_csv_writers(PROJECT)
    assert not offenders, "write CSV with core.exports.csv_writer (it neutralises formulas):\n" + "\n".join(offenders)


def test_a_module_with_its_own_csv_writer_is_named(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "own.py").write_text("import csv\n\ndef f(out):\n    return csv.writer(out)\n")
    (tmp_path / "app" / "dict.py").write_text("from csv import DictWriter\n")
    (tmp_path / "app" / "reads.py").write_text("import csv\n\ndef f(lines):\n    return csv.reader(lines)\n")
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "exports.py").write_text("import csv\n\nw = csv.writer\n")
    assert own_csv_writers(tmp_path) == ["app/dict.py:1", "app/own.py:4"]
