# Two commands for a newcomer: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
MANAGE := $(PY) manage.py
STAMP := $(VENV)/.installed

.PHONY: run receiver serve test check docs install migrate stop-db clean bench bench-deps bench-quick bench-million chaos screenshots

$(STAMP): requirements.txt requirements-receiver.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(MANAGE) migrate --noinput --verbosity 0
	@echo "Databases migrated."

run: migrate
	./bin/run-dev

# The demo application's receiver alone (its tables, people and dataset installed), registered for demo:
# people (the walkthroughs reach it over HTTP).
receiver: migrate
	./bin/run-receiver

# The production web server: gunicorn serving config.wsgi, static files by whitenoise.
# Reads the production environment (DEPLOYMENT_ENV, DJANGO_SECRET_KEY, ALLOWED_HOSTS,
# DATABASE_URL, REDIS_URL, ...); deploy/ has systemd units around it.
BIND ?= 127.0.0.1:8000
WEB_WORKERS ?= 2
serve: install
	$(MANAGE) collectstatic --noinput --verbosity 0
	$(VENV)/bin/gunicorn config.wsgi --bind $(BIND) --workers $(WEB_WORKERS) --access-logfile - \
		--forwarded-allow-ips "$${FORWARDED_ALLOW_IPS:-127.0.0.1}" --graceful-timeout 30

# The browser tests need Debian's chromium: bin/need-chromium installs it (apt-get) or fails saying how.
test: install
	./bin/need-chromium
	$(PY) -m pytest

check: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports

# The docs site (docs/, mkdocs-material) into site/; strict: a broken link or a missing page fails.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict  # not --quiet: it hides the warnings strict mode counts

# The case pages the docs show (docs/reference/case-pages.md), taken by the browser test that checks them.
screenshots: install
	$(PY) -m pytest -q tests/browser/test_every_page.py -k the_case_pages_a_support_lead_opens_first
	mkdir -p docs/images/case-pages
	cp test-artifacts/screenshots/case-pages/*.png docs/images/case-pages/

stop-db: install
	$(MANAGE) embedded_db stop

clean: stop-db
	rm -rf .pgdata .pgdata.lock

# The bench's own peers (procrastinate and DBOS: bench/peer.py, bench/dbos_peer.py) are installed
# for it here, never by the project.
bench-deps: install
	$(PY) -m pip install --quiet -r requirements-bench.txt

bench: bench-deps
	$(PY) bench/run.py

bench-quick: bench-deps
	$(PY) bench/run.py --quick

# The console, /metrics and the watcher at a million cases of each workflow, on their own.
bench-million: install
	$(PY) bench/run.py --only million

chaos: install
	$(MANAGE) chaos --seconds 600 --workers 4 --requests 40 --db-restarts
