# chatops: `make demo` and `make test` each set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORPUS ?= examples/wiki
DEMO_QUESTIONS ?= examples/demo_questions.txt
DEMO_DATA ?= .chatops-demo
EVAL_DATA ?= .chatops-eval
SHARED ?= ../shared
STAMP := $(VENV)/.installed
CHECKOUT_PTH := $(VENV)/.checkout-on-path
RUNTIME_STAMP := $(VENV)/.installed-runtime
# mkdocs-material prints a notice about MkDocs 2.0 on every build; the site is built with MkDocs 1.x.
export NO_MKDOCS_2_WARNING := 1

.PHONY: install install-runtime install-extras lock lock-llm llm-venv demo test test-fast test-llm lint docs docs-serve bench bench-llm eval eval-shared clean teams-package

# install: everything, the test extra and the optional features' extras included (make test, make docs);
# install-runtime: what the bot needs to run and nothing else (make demo: no test tool, no optional extra;
# app/extras.py names the extra a setting needs). Each has its own stamp.
install: $(STAMP) $(CHECKOUT_PTH)
install-runtime: $(RUNTIME_STAMP)

# Re-installs only when pyproject.toml or the lock changes (idempotent, fast when nothing changed).
# Every package, the build tools (pip, setuptools, wheel) included, comes from the lock and must match one
# of its SHA-256 hashes; the project itself is then installed without resolving again.
# The project's modules are then compiled to bytecode, as pip does for the packages it installs (an editable
# install is not compiled): a process run with PYTHONDONTWRITEBYTECODE=1 (containers, CI, many dev shells)
# otherwise compiles every module it imports on every run, 0.15-0.3 s of CPU per `chatops ask`
# (bench/ask_latency.py). Python checks each .pyc against its source's mtime and size, so an edited module is
# compiled again, never run stale. PACKAGES: pyproject.toml's [tool.setuptools.packages.find].
PACKAGES := bot app agent tools index connectors core state screening telemetry
define install_from
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "chatops needs Python 3.11 or newer")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(1)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m compileall -q $(PACKAGES)
endef

$(STAMP): pyproject.toml requirements.lock
	$(call install_from,requirements.lock)
	@touch $(STAMP) $(RUNTIME_STAMP)

# The checkout's root on the dev venv's path (chatops-checkout.pth in site-packages, read by Python's site
# module): `tests` and `bench` are packages of the repository, not of the wheel (the editable install maps
# only the wheel's packages), and this is how `python bench/x.py` imports `tests.standins...` (pytest finds them
# from tests/__init__.py by itself). The runtime venv (make demo) and the image do without.
$(CHECKOUT_PTH): $(STAMP)
	$(BIN)/python -c 'import pathlib, sys, sysconfig; \
	  pathlib.Path(sysconfig.get_path("purelib"), "chatops-checkout.pth").write_text(sys.argv[1] + "\n")' "$(CURDIR)"
	@touch $@

$(RUNTIME_STAMP): pyproject.toml requirements-runtime.lock
	$(call install_from,requirements-runtime.lock)
	@touch $(RUNTIME_STAMP)

# Re-resolves requirements.lock from pyproject.toml with every extra (run after changing a dependency; commit
# the result; uv keeps the pins already in a lock unless a requirement changed), then its subsets, same pins
# and hashes: requirements-runtime.lock, no extra (make demo), and requirements-extras.lock, the optional
# features' extras (teams, llm, google, microsoft, postgres, otel, mcp; app/extras.py) without the test tools (the container image).
OPTIONAL_EXTRAS := teams llm google microsoft postgres otel mcp
lock:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'uv>=0.9,<1'
	$(BIN)/uv pip compile pyproject.toml requirements-build.in --all-extras --generate-hashes --universal \
	  --python-version 3.11 --no-header -o requirements.lock
	$(BIN)/uv pip compile pyproject.toml requirements-build.in -c requirements.lock --generate-hashes --universal \
	  --python-version 3.11 --no-header -o requirements-runtime.lock
	$(BIN)/uv pip compile pyproject.toml requirements-build.in $(addprefix --extra ,$(OPTIONAL_EXTRAS)) \
	  -c requirements.lock --generate-hashes --universal --python-version 3.11 --no-header -o requirements-extras.lock

# The optional features (teams, llm, google, microsoft, postgres, otel, mcp) into a runtime venv, from the hashed lock: make install-extras
# after make demo (make install has them already).
install-extras: install-runtime
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements-extras.lock

demo: install-runtime
	@echo "== indexing $(CORPUS)"
	CHATOPS_DATA_DIR=$(DEMO_DATA) $(BIN)/chatops index folder:$(CORPUS)
	@if [ "$(CORPUS)" = "examples/wiki" ]; then qfile=$(DEMO_QUESTIONS); else qfile=""; fi; \
	if [ -n "$$qfile" ]; then \
	  while IFS= read -r q; do [ -n "$$q" ] || continue; echo; echo "== Q: $$q"; \
	    CHATOPS_DATA_DIR=$(DEMO_DATA) $(BIN)/chatops ask "$$q" || exit 1; done < "$$qfile"; \
	else \
	  for q in "$(or $(Q1),what is this handbook about?)" "$(or $(Q2),how do I ask for time off?)" "$(or $(Q3),what is the office wifi password?)"; do \
	    echo; echo "== Q: $$q"; CHATOPS_DATA_DIR=$(DEMO_DATA) $(BIN)/chatops ask "$$q" || exit 1; done; \
	fi

# make test: the whole suite (real-model tier aside) on TEST_WORKERS processes (pytest-xdist), each module's tests
# on one worker (what a module builds once is built once; tests/conftest.py). TEST_WORKERS=0: one process.
# make test-fast: the inner loop, the tests marked neither `server` (PostgreSQL, MediaWiki, Chromium, chatops
# subprocesses, the docs build, the handbook) nor `llm_real`; no lint. Narrow either with PYTEST_ARGS.
# PYTHONDONTWRITEBYTECODE is unset for the run (a shell or CI may set it): pytest then keeps each test module's
# assertion-rewritten bytecode in tests/__pycache__ (git-ignored) instead of rewriting and compiling all of them
# again in every worker on every run, about 14 s of CPU per worker (28 s with it set, collection alone).
TEST_WORKERS ?= 2
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
  --no-loadscope-reorder

test: install lint
	$(PYTEST) $(PYTEST_ARGS)

test-fast: install
	$(PYTEST) -m 'not server and not llm_real' $(PYTEST_ARGS)

# The documentation site (docs/, mkdocs.yml) into site/; the reference pages are generated from the code
# at build time (docs/hooks/reference.py). make test builds it with --strict too (tests/test_docs.py).
docs: install
	$(BIN)/mkdocs build --strict

docs-serve: install
	$(BIN)/mkdocs serve

# The real-model tier (tests/llm_real, marker llm_real, left out of `make test`): the LLM mode against
# SmolLM2-135M-Instruct served by llama-cpp-python's OpenAI-compatible server on 127.0.0.1. Its venv
# ($(LLM_VENV)) comes from the requirements-llm*.lock files; llama-cpp-python is compiled once (10-20 min
# on 2 cores) into $(CHATOPS_LLM_WHEELS), later runs take seconds. Under CI=true a server that cannot
# start fails the tier instead of skipping it.
LLM_VENV ?= .venv-llm
export CHATOPS_LLM_WHEELS ?= $(HOME)/.cache/chatops-llm/wheels

llm-venv:
	LLM_VENV=$(LLM_VENV) PYTHON=$(PYTHON) .ci/llm-venv

test-llm: install llm-venv
	CHATOPS_LLM_PYTHON=$(abspath $(LLM_VENV))/bin/python \
	  $(BIN)/python -m pytest -q -p no:cacheprovider -m llm_real tests/llm_real $(PYTEST_ARGS)

# The dev sets (../shared) in LLM mode against the same server: bench/llm_real.py [--limit N].
bench-llm: install llm-venv eval-shared
	CHATOPS_LLM_PYTHON=$(abspath $(LLM_VENV))/bin/python $(BIN)/python bench/llm_real.py $(BENCH_ARGS)

# Re-resolves the real-model tier's locks (the server, its build tools, the model file; commit the result).
lock-llm:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'uv>=0.9,<1'
	$(BIN)/uv pip compile requirements-llm.in --generate-hashes --python-version 3.11 --no-header \
	  -o requirements-llm.lock
	$(BIN)/uv pip compile requirements-llm-build.in --generate-hashes --python-version 3.11 --no-header \
	  -o requirements-llm-build.lock
	$(BIN)/uv pip compile requirements-llm-model.in --no-deps --generate-hashes --python-version 3.11 --no-header \
	  -o requirements-llm-model.lock

# The Teams app package (dist/chatops-teams.zip): bot/teams/manifest/manifest.json filled from MicrosoftAppId,
# TEAMS_BOT_DOMAIN, TEAMS_APP_NAME and TEAMS_DEVELOPER_NAME (environment or .env), zipped with the icons.
teams-package: install
	$(BIN)/python -m bot.teams.package --out $(or $(TEAMS_PACKAGE),dist/chatops-teams.zip)

# The layering contracts, a small bug-finding rule set and the type checker (all configured in pyproject.toml).
# mypy keeps its incremental cache in MYPY_CACHE_DIR, outside the checkout, so it survives a fresh clone the way
# the tests' embedding cache does: a cold check takes about 65 s of CPU, a warm one 2 s. mypy checks every cached
# module against its source's hash, so a cache from another checkout or commit is never trusted stale.
export MYPY_CACHE_DIR ?= $(HOME)/.cache/chatops-mypy
lint: install
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check --no-cache .
	$(BIN)/mypy

bench: install
	$(BIN)/python bench/index_throughput.py
	$(BIN)/python bench/search_latency.py
	$(BIN)/python bench/agent_overhead.py
	$(BIN)/python bench/slack_load.py
	$(BIN)/python bench/sync_unchanged.py
	$(BIN)/python bench/ask_latency.py
	$(BIN)/python bench/mcp_latency.py

# The three dev sets (../shared, beside this clone) and the PostHog set (eval/posthog), each on its own index under
# $(EVAL_DATA)/eval/NAME
# (incremental on re-runs, one embedding cache): one table with a row per set.
eval: eval-shared install
	CHATOPS_DATA_DIR=$(EVAL_DATA) $(BIN)/chatops eval \
	  --set "dev=$(SHARED)/eval/dev.jsonl::folder:$(SHARED)/corpus/sourcegraph-handbook?url_base=https://handbook.sourcegraph.com/" \
	  --set "dev2=$(SHARED)/eval/dev2.jsonl::folder:$(SHARED)/corpus/meltano-handbook" \
	  --set "dev3=$(SHARED)/eval/dev3.jsonl::folder:$(SHARED)/corpus/18f-handbook" \
	  --set "posthog=eval/posthog/questions.jsonl::folder:eval/posthog/handbook"

eval-shared:
	@for f in eval/dev.jsonl eval/dev2.jsonl eval/dev3.jsonl corpus/sourcegraph-handbook corpus/meltano-handbook \
	  corpus/18f-handbook; do test -e "$(SHARED)/$$f" || { echo "make eval: $(SHARED)/$$f is missing; the dev sets \
	and their corpora come from ../shared beside this clone (set SHARED=DIR to use another folder)" >&2; exit 2; }; done

clean:
	rm -rf $(DEMO_DATA) .pytest_cache .mypy_cache site
