"""One version, said the same everywhere: pyproject.toml's `[project] version` (core.version, what the
status report shows) is CHANGELOG.md's latest released version, so a release cannot bump one and forget
the other. The CHANGELOG keeps the Keep a Changelog 1.1.0 form: Unreleased on top, then releases newest
first with ISO dates, their entries under Added / Changed / Deprecated / Removed / Fixed / Security."""

import re
from datetime import date

from core.version import VERSION, read_version
from tests.paths import PROJECT_DIR

CHANGELOG = PROJECT_DIR / "CHANGELOG.md"
RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$")
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def releases(text: str) -> list[tuple[tuple[int, int, int], date]]:
    found = []
    for heading in _headings(text):
        match = RELEASE.match(heading)
        if match:
            major, minor, patch, day = match.groups()
            found.append(((int(major), int(minor), int(patch)), date.fromisoformat(day)))
    return found


def test_the_reported_version_is_the_changelogs_latest_release():
    (latest, _day), *_ = releases(CHANGELOG.read_text())
    assert VERSION == read_version() == ".".join(map(str, latest)), (
        f"pyproject.toml says {VERSION}, CHANGELOG.md's latest release is {'.'.join(map(str, latest))}: "
        "a release sets both in the same commit")


def test_the_check_reads_a_bumped_version_as_a_mismatch(tmp_path):
    """The comparison above fails when only pyproject.toml moves (a release that forgot the CHANGELOG)."""
    bumped = tmp_path / "pyproject.toml"
    bumped.write_text((PROJECT_DIR / "pyproject.toml").read_text().replace(f'version = "{VERSION}"',
                                                                           'version = "99.0.0"', 1))
    (latest, _day), *_ = releases(CHANGELOG.read_text())
    assert read_version(bumped) == "99.0.0" != ".".join(map(str, latest))


def test_the_changelog_has_unreleased_on_top_then_releases_newest_first():
    text = CHANGELOG.read_text()
    headings = _headings(text)
    assert headings[0] == "## [Unreleased]"
    assert all(RELEASE.match(h) for h in headings[1:]), [h for h in headings[1:] if not RELEASE.match(h)]
    found = releases(text)
    versions, days = [v for v, _ in found], [d for _, d in found]
    assert len(found) >= 2 and versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert days == sorted(days, reverse=True)


def test_every_entry_sits_under_a_kind_of_change():
    kind, section, wrong = None, None, []
    for line in CHANGELOG.read_text().splitlines():
        if line.startswith("## "):
            section, kind = line, None
        elif line.startswith("### "):
            kind = line[4:]
            if kind not in KINDS:
                wrong.append(f"{section}: ### {kind}")
        elif line.startswith("- ") and section and kind is None:
            wrong.append(f"{section}: an entry before any ### kind: {line[:60]}")
    assert not wrong, wrong
