# Two entry points for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
SYSTEM_STAMP := $(VENV)/.system

.PHONY: demo test lint typecheck pytest install system-deps clean

$(PY):
	python3 -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,lightpanda]'
	touch $@

# Debian's chromium and hyperfine; skipped when present, tolerated when apt is absent.
$(SYSTEM_STAMP): | $(PY)
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v hyperfine >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium hyperfine >/dev/null; \
	  else echo "warning: cannot install chromium/hyperfine here (need root and apt-get)"; fi; \
	fi
	touch $@

install: $(STAMP) $(SYSTEM_STAMP)

system-deps: $(SYSTEM_STAMP)

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

typecheck: install
	$(VENV)/bin/mypy

pytest: install
	$(VENV)/bin/pytest -q -p no:cacheprovider

test: lint typecheck pytest

demo: install
	$(VENV)/bin/metewand demo

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
