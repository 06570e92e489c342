"""The version this code reports: `[project] version` in pyproject.toml, its one home.

pyproject.toml is where Python packaging and its tools read a project's version, and the image has it
(the Dockerfile copies the tree), so the code reads it from there instead of keeping a copy. CHANGELOG.md's
latest released heading names the same version (tests/house/test_version.py holds the two together): a
release moves the Unreleased entries under a new heading and sets this version in the same commit.

    VERSION   e.g. "0.7.0"; shown by the staff status report (/status, `manage.py status`)
"""

import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def read_version(path: Path = PYPROJECT) -> str:
    with path.open("rb") as file:
        return tomllib.load(file)["project"]["version"]


VERSION = read_version()
