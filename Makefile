# Two set-up commands work on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MANAGE := $(PY) manage.py
HOST ?= 127.0.0.1
PORT ?= 8000
# `make test` runs the suite in this many processes (pytest-xdist; 0: in this one process).
# Each has its own test database and Redis database (tests/parallel.py). xdist's default
# distribution (--dist load) hands each process the tests in the order pytest-django sorted them,
# transactional tests (which empty the tables, data migrations' groups included) after the rest;
# --dist loadfile ran another file's plain tests after them: "Group matching query does not exist".
TEST_WORKERS ?= 2

.PHONY: run test install install-dev migrate demo lint format bench faults prod-check chromium pdflatex clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt | $(PY)
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt $(VENV)/.installed
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

migrate: install
	$(MANAGE) migrate --no-input

# Migrates and loads under one lock per VAR_DIR: a second `make run` waits for the first.
demo: install
	$(MANAGE) load_demo --migrate --base-url http://$(HOST):$(PORT)

## make run: set up everything, load the demo data, print the logins, serve on http://$(HOST):$(PORT)
run: demo
	@echo "Serving on http://$(HOST):$(PORT)  (Ctrl-C to stop)"
	$(MANAGE) runserver $(HOST):$(PORT)

## Debian's chromium for the browser tests (Playwright drives it; it never downloads a browser).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "WARNING: could not install chromium; browser tests will be skipped"; }

## Debian's pdflatex with booktabs, for the tests that typeset the LaTeX exports as a paper would.
pdflatex:
	@command -v pdflatex >/dev/null 2>&1 || { \
	  echo "Installing Debian's pdflatex for the LaTeX export tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	     texlive-latex-base texlive-latex-recommended >/dev/null) \
	  || echo "WARNING: could not install pdflatex; the LaTeX compile tests will be skipped"; }

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: install-dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## make test: lint, import contracts, the whole pytest suite (SQLite, or DATABASE_URL if set),
## in TEST_WORKERS processes
test: install-dev chromium pdflatex lint
	$(MANAGE) makemigrations --check --dry-run >/dev/null || { echo "Missing migrations: run manage.py makemigrations"; exit 1; }
	$(VENV)/bin/pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

## make bench: performance scripts; results go to docs/benchmarks.md by hand
bench: install-dev
	$(PY) tests/bench/run_all.py $(BENCH_ARGS)

## make faults: kill the worker, stop Redis, restart PostgreSQL (private servers on free ports);
## each script prints a PASS/FAIL verdict. Not part of `make test`. Results: docs/reliability.md
faults: install-dev
	@failed=0; for script in tests/faults/fault_*.py; do \
	  echo "=== $$script ==="; $(PY) $$script || failed=1; done; exit $$failed

prod-check: install
	DJANGO_SETTINGS_MODULE=config.settings.production DJANGO_SECRET_KEY=$${DJANGO_SECRET_KEY:-prod-check-$$(head -c 32 /dev/urandom | base64 | tr -dc a-zA-Z0-9)} \
	  DJANGO_ALLOWED_HOSTS=$${DJANGO_ALLOWED_HOSTS:-annotate.example.org} DJANGO_DEBUG=false \
	  $(MANAGE) check --deploy --fail-level WARNING

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
