# The README's two commands: `make demo` and `make test`. Both create .venv and install
# requirements.txt on first use (and again whenever requirements.txt changes).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

demo: $(STAMP)
	UNSAY_PROFILE=demo $(PY) manage.py demo

test: $(STAMP)
	UNSAY_PROFILE=test $(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
