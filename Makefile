# Euler: `make up` runs the platform on this machine, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.dev-installed
CLIENT_STAMP := $(VENV)/.client-installed

.PHONY: up test test-flaky test-deploy lint format clean-data

# make up: the runtime set only, as locked (every file's sha256: requirements-runtime.lock, and requirements-up.lock
# for the embedded Redis). The hashes are the Linux x86_64 CPython 3.11 files: elsewhere the same pins are
# installed without them, saying so.
$(STAMP): requirements-runtime.lock requirements-up.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { echo "python3 -m venv failed: on Debian/Ubuntu run 'apt-get install python3-venv' first"; exit 1; }
	$(PY) -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r requirements-runtime.lock -r requirements-up.lock \
	  || { echo "make: the locked hashes do not fit this platform; installing the same pins without them"; \
	       $(PY) -m pip install -q --disable-pip-version-check -r requirements-runtime.txt -r requirements-up.txt; }
	@touch $(STAMP)

# make test, lint: the test and development tools on top (requirements-dev.txt).
$(DEV_STAMP): $(STAMP) requirements-dev.txt
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	@touch $(DEV_STAMP)

# The `euler` CLI (client/, its own package), editable so that .venv/bin/euler runs the working tree
# ("compat": a plain path entry, cheaper at every start-up than the import hook of the default mode); the command
# itself is client/scripts/euler (client/setup.py).
$(CLIENT_STAMP): $(STAMP) client/pyproject.toml client/setup.py client/scripts/euler
	$(PY) -m pip install -q --disable-pip-version-check -e ./client --config-settings editable_mode=compat
	@touch $(CLIENT_STAMP)

up: $(STAMP) $(CLIENT_STAMP)
	$(PY) -m config.up

# The whole suite on TEST_WORKERS pytest-xdist workers, each with its own database, Redis database number
# (REDIS_URL's plus the worker's index), data dir and ports (config/settings_test.py, tests/ports.py). More workers
# than cores: the end-to-end tests partly wait on their subprocesses; on 2 cores the suite is CPU-bound on 3 or 4,
# and 4 was as fast or faster run to run (BENCHMARKS.md "The suite on pytest-xdist workers"). Bytecode is cached
# whatever the environment says (PYTEST): every process the tests start (e2e web, workers, agents, `euler`,
# `manage.py`) imports the project: compiled afresh in each, ~0.37 CPU-s more per e2e platform's boot.
# Tests that share something machine-wide are put in one xdist_group each (tests/conftest.py), which --dist
# loadgroup runs on a single worker.
TEST_WORKERS ?= 4
PYTEST = env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest
test: $(DEV_STAMP) $(CLIENT_STAMP)
	$(PYTEST) -n $(TEST_WORKERS) --dist loadgroup --durations 40 $(PYTEST_ARGS)

# The end-to-end folder FLAKY_ROUNDS times over (pytest-repeat), on the same workers as `make test`: a test that
# fails once in these rounds is a bug to find, never a retry to add.
FLAKY_ROUNDS ?= 10
test-flaky: $(DEV_STAMP) $(CLIENT_STAMP)
	$(PYTEST) tests/e2e --count $(FLAKY_ROUNDS) -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The shipped compose stack built offline and driven end to end through its TLS front (docs/deploy.md);
# needs root, Docker, docker-compose and mmdebstrap. Prints the figures BENCHMARKS.md quotes.
test-deploy: $(DEV_STAMP) $(CLIENT_STAMP)
	$(PY) -m pytest tests/deploy -m deploy -s --timeout 2400 $(PYTEST_ARGS)

# lint-imports: the import contracts of .importlinter (docs/architecture.md); the client's package is under client/.
lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PYTHONPATH=client $(VENV)/bin/lint-imports --no-cache

format: $(DEV_STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean-data:
	rm -rf var
