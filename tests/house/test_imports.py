"""Imports sit at the top of a product module (ruff's PLC0415). An import that must stay inside a function says
why: a comment on the line above it (AppConfig.ready, a cycle .importlinter names, a heavy or optional
dependency loaded on first use, Django start-up, a management command's lazy import of a slow module), or text
after the code on its own line. Consecutive imports under one comment share it. A file-wide `ruff: noqa` of
the rule is refused: it would hide every import the file has."""

import io
import re
import tokenize
from pathlib import Path

from tests.paths import PROJECT_DIR as PROJECT

NOT_PRODUCT = {"tests", "bench", "migrations", ".venv", "node_modules", "var"}
RULE = "PLC0415"
NOQA = re.compile(r"#\s*(?P<file>ruff:\s*)?noqa:\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)(?P<rest>.*)")


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """line number -> (comment text, whether the comment is the whole line)."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            line = token.line.splitlines()[0] if token.line else ""
            found[token.start[0]] = (token.string, not line[: token.start[1]].strip())
    return found


def _noqa_of_rule(comment: str):
    match = NOQA.search(comment)
    if match and RULE in re.split(r"\s*,\s*", match["codes"]):
        return match
    return None


def unexplained_imports(root: Path) -> list[str]:
    """'path:line' of each product line that silences the rule with no reason given."""
    offenders = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if NOT_PRODUCT & set(relative.parts[:-1]) or any(part.startswith(".") for part in relative.parts):
            continue
        source = path.read_text(encoding="utf-8")
        comments = _comments(source)
        silenced = {number for number, (text, _) in comments.items() if _noqa_of_rule(text)}
        lines = source.splitlines()
        for number in sorted(silenced):
            match = _noqa_of_rule(comments[number][0])
            if match["file"]:
                offenders.append(f"{relative}:{number}: a file-wide noqa of {RULE}")
                continue
            said_after = match["rest"].strip(" \t-:;()") or comments[number][0][: match.start()].strip("# \t")
            if said_after or _comment_above(number, lines, comments, silenced):
                continue
            offenders.append(f"{relative}:{number}")
    return offenders


def _comment_above(number: int, lines: list[str], comments: dict, silenced: set[int]) -> bool:
    """A whole-line comment right above `number`, or above a run of silenced imports it belongs to (blank
    lines may part the run, as isort parts sections, but not the comment from the first import)."""
    gap = False
    for above in range(number - 1, 0, -1):
        if not lines[above - 1].strip():
            gap = True
        elif above in silenced:
            gap = False
        elif above in comments and comments[above][1]:
            return not gap and not _noqa_of_rule(comments[above][0])
        else:
            return False
    return False


def test_every_import_inside_a_function_says_why():
    offenders = unexplained_imports(PROJECT)
    assert not offenders, (f"`noqa: {RULE}` with no reason (a comment on the line above, or text after the "
                           "code):\n" + "\n".join(offenders))


def test_an_unexplained_import_is_named_and_explained_ones_are_not(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "mod.py").write_text(
        "def explained_above():\n"
        "    # A heavy dependency loaded on first use.\n"
        f"    import numpy  # noqa: {RULE}\n"
        f"    import onnx  # noqa: {RULE}\n"
        "\n"
        f"    from . import local  # noqa: {RULE}\n"
        "\n"
        "\n"
        "def explained_after():\n"
        f"    import json  # noqa: F401, {RULE} - the probe of an optional dependency\n"
        "\n"
        "\n"
        "def unexplained():\n"
        "    x = 1\n"
        f"    import csv  # noqa: {RULE}\n"
        "\n"
        "\n"
        "def comment_parted_by_a_blank_line():\n"
        "    # Not about the import.\n"
        "\n"
        f"    import csv  # noqa: {RULE}\n"
        "\n"
        "\n"
        "def other_rules_only():\n"
        "    import csv  # noqa: F401\n"
    )
    (tmp_path / "app" / "whole.py").write_text(f"# ruff: noqa: {RULE}\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(f"def f():\n    import csv  # noqa: {RULE}\n")
    assert unexplained_imports(tmp_path) == ["app/mod.py:15", "app/mod.py:21",
                                             f"app/whole.py:1: a file-wide noqa of {RULE}"]
