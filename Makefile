# The README's two commands: `make demo` and `make test`. Both create .venv and install
# requirements.txt (runtime + test + dev, from requirements/) on first use and again whenever one of
# those files changes.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint check bench

# Python caches compiled modules in __pycache__ (git ignores it) for every command here, even where the
# shell sets PYTHONDONTWRITEBYTECODE: without the cache every process -- each test worker and each of the
# hundreds of `manage.py` and helper processes the tests start -- compiles the app's modules again
# (about 0.2 s a process, and a test worker's collection compiles every test module).
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): requirements.txt $(wildcard requirements/*.txt)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

demo: $(STAMP)
	UNSAY_PROFILE=demo $(PY) manage.py demo

# Settings probe nothing at import, so the machine's Redis (when one answers on 6379) is named here:
# tests use its db 15, so tasks they queue never reach a demo or dev worker.
LOCAL_REDIS := $(shell (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && echo redis://127.0.0.1:6379/15)

# Every test, in parallel (pytest-xdist): each worker has its own test database (<name>_gw0, _gw1, ...),
# and the `slow` tests (real processes, timings) run one after another within each of their two groups
# (shared services / own database only: tests/conftest.py). TEST_WORKERS=0 for a serial run. `make test-fast` skips the slow ones for a
# quick loop; CI (.ci/run) runs `make test`.
TEST_WORKERS ?= auto
PYTEST := UNSAY_PROFILE=test REDIS_URL=$${REDIS_URL:-$(LOCAL_REDIS)} $(PY) -m pytest -n $(TEST_WORKERS) \
	--maxprocesses 4 --dist loadgroup

test: $(STAMP)
	$(PYTEST)

test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/deptry . --config requirements/deptry.toml
	$(VENV)/bin/lint-imports

# What .ci/run checks before `make test`: lint, every import declared, the layers (.importlinter), no model change without its
# migration, and the production profile's deploy checks for the README's production environment.
DEPLOY_ENV := UNSAY_PROFILE=production SECRET_KEY=ci-check-deploy-only-0123456789-abcdefghijklmnopqrstuvwxyz \
	UNSAY_AUDIT_KEY=ci:ci-check-deploy-only-audit-key-0123456789 \
	UNSAY_ALLOWED_HOSTS=unsay.example.org UNSAY_BEHIND_TLS_PROXY=1 UNSAY_HSTS_SECONDS=31536000 \
	UNSAY_HSTS_INCLUDE_SUBDOMAINS=1 UNSAY_HSTS_PRELOAD=1
# The house rules that read the source, not the database: every status write goes through the checked
# transition (tests/house/test_status_writers.py), no product module over 600 lines, model relations keep to
# the layers and tables are named for their app, an import left inside a function says why.
HOUSE_TESTS := tests/house/test_status_writers.py tests/house/test_module_sizes.py tests/house/test_model_layers.py \
	tests/house/test_imports.py
check: lint
	UNSAY_PROFILE=test $(PY) -m pytest -q -p no:cacheprovider $(HOUSE_TESTS)
	UNSAY_PROFILE=test $(PY) manage.py makemigrations --check --dry-run
	$(DEPLOY_ENV) $(PY) manage.py check --deploy --fail-level WARNING
