"""No product module over 600 lines: a module that long has more than one job. Migrations (generated),
bench/ (measurements) and tests/ are not product code."""

from pathlib import Path

from tests.paths import PROJECT_DIR as PROJECT

LIMIT = 600
NOT_PRODUCT = {"tests", "bench", "migrations", ".venv", "node_modules", "var"}


def oversized_modules(root: Path, limit: int = LIMIT) -> list[str]:
    """'path: N lines' for each product .py under root longer than `limit`, longest first."""
    found = []
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        if NOT_PRODUCT & set(relative.parts[:-1]) or any(part.startswith(".") for part in relative.parts):
            continue
        with path.open(encoding="utf-8", errors="replace") as handle:
            lines = sum(1 for _ in handle)
        if lines > limit:
            found.append((lines, str(relative)))
    return [f"{name}: {lines} lines" for lines, name in sorted(found, reverse=True)]


def test_no_product_module_is_over_600_lines():
    offenders = oversized_modules(PROJECT)
    assert not offenders, f"product modules over {LIMIT} lines (split them by job):\n" + "\n".join(offenders)


def test_an_oversized_module_is_named_and_non_product_code_is_not(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (tmp_path / "app" / "short.py").write_text("x = 1\n" * LIMIT)
    for skipped in ("tests", "bench", "app/migrations"):
        (tmp_path / skipped).mkdir(parents=True)
        (tmp_path / skipped / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    assert oversized_modules(tmp_path) == [f"app/long.py: {LIMIT + 1} lines"]
