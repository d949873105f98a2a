# Two commands a newcomer needs: `make demo` and `make test`. Each creates .venv when missing.
# `make demo` installs the default install (what `pip install skillreach` gives: every command and the
# design card's runtimes), `make test` adds the test extras into the same .venv: two stamps.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed

.PHONY: demo test test-latest lint typecheck pytest up bench clean

# uv from PyPI into the venv (pip itself is not upgraded: the venv's own installs uv, seconds saved)
$(BIN)/uv:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv

$(DEMO_STAMP): pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e .
	touch $(DEMO_STAMP)

# The test extras compile the dependencies' bytecode (uv does not by default, pip does): the suite
# imports most of them many times over.
$(STAMP): pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]'
	touch $(DEMO_STAMP) $(STAMP)

# The demo caches the bytecode of what it imports even when the shell sets PYTHONDONTWRITEBYTECODE
# (bench/demo_time.py: compiling on every run more than doubles a warm demo's CPU); the install does not
# compile all of scipy's and Prefect's modules up front, most of which the demo never loads.
demo: $(DEMO_STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/skillreach run

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Three pytest-xdist workers: half of the suite's wall is waiting (servers, worker processes, stand-in
# latency); tests/conftest.py keeps a module on one worker, the real-Prefect integration tests in two units
# (one a worker, each about half a core busy), the third worker takes the rest from the start, and each
# worker gets its own Prefect home and database. Beside stress-ng --cpu 2 on two cores: pytest 2,007 s
# with three workers, 2,364 s with two (2026-12-06).
PYTEST_WORKERS ?= 3
pytest: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# The newest releases of the packages we bound or lean on (prefect, anthropic, openai, sqlalchemy),
# past our upper bounds (uv's --override), in a throw-away venv, then the suite (or PYTEST_ARGS, e.g.
# PYTEST_ARGS=tests/test_prefect_adapter.py): an upgrade that breaks us is found before users find it.
# An override replaces every requirement of its package, extras included: sqlalchemy keeps [asyncio]
# (greenlet, which Prefect's server needs and SQLAlchemy 2.1 no longer installs by itself).
LATEST := .venv-latest
test-latest:
	rm -rf $(LATEST)
	$(PY) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --disable-pip-version-check uv
	printf 'prefect\nanthropic[aiohttp]\nopenai\nsqlalchemy[asyncio]\n' > $(LATEST)/latest.txt
	$(LATEST)/bin/uv pip install --quiet --python $(LATEST)/bin/python --upgrade \
		--override $(LATEST)/latest.txt -e '.[test]'
	$(LATEST)/bin/python -c "from importlib.metadata import version as v; \
		print(' '.join(f'{p} {v(p)}' for p in ('prefect', 'anthropic', 'openai', 'sqlalchemy')))"
	env -u PYTHONDONTWRITEBYTECODE $(LATEST)/bin/pytest -q -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

up: $(STAMP)
	$(BIN)/skillreach serve

bench: $(STAMP)
	for f in bench/[!_]*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) $(LATEST) .skillreach .prefect .pytest_cache .mypy_cache .ruff_cache
