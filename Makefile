# Two commands a newcomer needs: `make demo` and `make test`. Each creates .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest up bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]'
	touch $(STAMP)

# Bytecode: the install compiles the dependencies (uv does not by default, pip does); the demo may
# cache our own modules even when the shell sets PYTHONDONTWRITEBYTECODE (bench/demo_time.py:
# compiling everything on every run more than doubles a warm demo's CPU).
demo: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/skillreach run

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Two pytest-xdist workers: half of the suite's wall is waiting (servers, worker processes, stand-in
# latency), so two processes overlap it; tests/conftest.py keeps a module on one worker, the real-Prefect
# integration tests together on one, and gives each worker its own Prefect home and database.
PYTEST_WORKERS ?= 2
pytest: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

up: $(STAMP)
	$(BIN)/skillreach serve

bench: $(STAMP)
	for f in bench/[!_]*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .skillreach .prefect .pytest_cache .mypy_cache .ruff_cache
