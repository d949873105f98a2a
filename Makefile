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

pytest: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q $(PYTEST_ARGS)

up: $(STAMP)
	$(BIN)/skillreach serve

bench: $(STAMP)
	for f in bench/[!_]*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .skillreach .prefect .pytest_cache .mypy_cache .ruff_cache
