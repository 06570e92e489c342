"""Where tests find the project and their data, whichever folder the test sits in."""

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
PROJECT_DIR = TESTS_DIR.parent
FIXTURES = TESTS_DIR / "fixtures"
OPENFDA = FIXTURES / "openfda"
