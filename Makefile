# Inference Release Ledger — the two commands of the Quick start are `make run`
# and `make test`; everything they need is installed from here.

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
# uv installs the same pinned set as pip in a tenth of the time (a clean install
# took 53 s with pip and 7 s with uv here); it is itself pinned and comes from pip.
UV_PIN := uv==0.13.9
UV_INSTALL = $(1)/bin/python -m pip install --quiet --disable-pip-version-check $(UV_PIN) && $(1)/bin/uv pip install --quiet --python $(1)/bin/python
PIP_INSTALL := $(call UV_INSTALL,$(VENV)) -c requirements.lock
# Two stamps: what running needs (`make run`), and that plus the test, lint and
# translation tools (everything else). The second covers the first.
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
# The LiteLLM proxy of the gateway tests, in its own virtualenv (its pins fight the app's).
GATEWAY_VENV := .venv-litellm
STAMP_GATEWAY := $(GATEWAY_VENV)/.installed
# The FinOps Foundation's FOCUS validator, for the cost export's tests (pandas 2 and
# pandera 0.17 pins of its own).
FOCUS_VENV := .venv-focus
STAMP_FOCUS := $(FOCUS_VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# Two workers, one per core: three were slower here (15 min 17 s against 14 min 35 s).
PYTEST_WORKERS ?= 2
# mypy's incremental cache outside the checkout, so a fresh clone (CI's) reuses it: it
# is checked against each file's content, and a cold run took 18 s of the 15 minutes.
export MYPY_CACHE_DIR ?= $(HOME)/.cache/inference-release-ledger/mypy

.PHONY: run test install install-run install-gateway install-focus services chromium prometheus lint format bench coverage clean plotly-css messages

# Everything: the app, and the tools of the tests, lint and the translation catalog.
install: $(STAMP_TEST)

# Only what running the app needs: `make run` starts without the test extras.
install-run: $(STAMP_RUN)

$(STAMP_RUN): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e .
	touch $(STAMP_RUN)

$(STAMP_TEST): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e ".[test]"
	touch $(STAMP_RUN) $(STAMP_TEST)

# LiteLLM for the real-gateway tests: not needed to run the app, so `make run` skips it.
install-gateway: $(STAMP_GATEWAY)

$(STAMP_GATEWAY): requirements-gateway.txt requirements-gateway.lock
	test -x $(GATEWAY_VENV)/bin/python || $(PYTHON) -m venv $(GATEWAY_VENV)
	$(call UV_INSTALL,$(GATEWAY_VENV)) -r requirements-gateway.txt -c requirements-gateway.lock
	touch $(STAMP_GATEWAY)

# The FOCUS validator for the cost-export tests: not needed to run the app.
install-focus: $(STAMP_FOCUS)

$(STAMP_FOCUS): requirements-focus.txt requirements-focus.lock
	test -x $(FOCUS_VENV)/bin/python || $(PYTHON) -m venv $(FOCUS_VENV)
	$(call UV_INSTALL,$(FOCUS_VENV)) -r requirements-focus.txt -c requirements-focus.lock
	touch $(STAMP_FOCUS)

# plotly.js's run-time CSS as a static file under the id it checks (the pages'
# Content-Security-Policy refuses the <style> elements it would inject). The pages
# load plotly.js's basic bundle, vendored from the npm registry at the version the
# plotly package ships (`npm pack plotly.js-basic-dist-min@X`, into
# static/vendor/plotly-basic-X.min.js); after upgrading it run this and commit.
plotly-css: install chromium
	$(PY) scripts/extract-plotly-css.py static/vendor

# The zh-hans catalog: collect every marked string, keep the translations, compile,
# list what is still untranslated (docs/glossary.md has the terms).
messages: install
	@command -v xgettext >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gettext)
	$(PY) scripts/translations.py

# The embedded default: SQLite, a filesystem broker, a local media folder.
run: install-run
	DEBUG=$${DEBUG:-true} LOG_FORMAT=$${LOG_FORMAT:-console} HOST=$(HOST) PORT=$(PORT) PY=$(PY) scripts/run-embedded.sh

services:
	scripts/ensure-services.sh

chromium:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# A real Prometheus for the rollout-analysis tests (tests/support/prometheus.py), which
# start their own on a free loopback port: a service the package may start on :9090
# is never what they query. Under systemd the package enables and starts one: stop and
# disable it, so installing test tools leaves nothing listening. No recommends: the
# node exporter would listen on :9100.
prometheus:
	@test -x /usr/bin/prometheus || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus && if test -d /run/systemd/system; then systemctl disable --now prometheus.service; fi)

# mypy's Django plugin loads config.settings, which accept the development key only with DEBUG.
test: install install-gateway install-focus services chromium prometheus
	$(VENV)/bin/ruff check .
	DEBUG=true $(VENV)/bin/mypy
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# Line coverage of each app over the whole suite (not part of make test: it is slower).
coverage: install install-gateway install-focus services chromium prometheus
	rm -f .coverage .coverage.*
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --cov --cov-report= $(PYTEST_ARGS)
	$(VENV)/bin/coverage combine --quiet || true
	@for app in lib ledger replay releases; do \
		printf '%-9s %s%%\n' $$app "$$($(VENV)/bin/coverage report --include="$$app/*" --format=total)"; \
	done
	$(VENV)/bin/coverage report --include='releases/*' --show-missing

lint: install
	$(VENV)/bin/ruff check .
	DEBUG=true $(VENV)/bin/mypy
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) $(GATEWAY_VENV) $(FOCUS_VENV) var staticfiles .pytest-artifacts .mypy_cache
