# Two entry points for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
SYSTEM_STAMP := $(VENV)/.system
NODE_DIR := drivers/node
NODE_STAMP := $(NODE_DIR)/node_modules/.metewand-installed

.PHONY: demo test lint typecheck pytest install bytecode system-deps clean

$(PY):
	python3 -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,lightpanda,drivers,dask]'
	touch $@

# Debian's chromium, chromedriver (the Selenium path) and hyperfine; skipped when present, tolerated
# when apt is absent. Node 20 and its npm come with the machine (Debian's npm conflicts with that
# nodejs build, so it is never asked for here); without npm the Node driver paths report missing.
$(SYSTEM_STAMP): | $(PY)
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v hyperfine >/dev/null 2>&1 \
	    || ! command -v chromedriver >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      chromium chromium-driver hyperfine >/dev/null; \
	  else echo "warning: cannot install chromium/chromedriver/hyperfine here (need root and apt-get)"; fi; \
	fi
	@# R and jsonlite for the Rust dialect's "r" runner (examples/rust-dialect/metewand-r.toml and
	@# its test); without recommends: six packages, ~25 s here. Julia has no Debian package.
	@if ! command -v Rscript >/dev/null 2>&1 || ! Rscript -e 'library(jsonlite)' >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends r-base-core r-cran-jsonlite >/dev/null \
	      || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	        --no-install-recommends r-base-core r-cran-jsonlite >/dev/null)); \
	  else echo "warning: cannot install r-base-core/r-cran-jsonlite here (need root and apt-get)"; fi; \
	fi
	touch $@

# The Node driver clients, exactly as locked, into drivers/node/node_modules (never globally).
# No browser is downloaded: the *-core packages carry none and install scripts are not run.
# agent-browser's CLI is a native binary shipped inside its npm package; its skipped postinstall
# would only have made it executable (and fetched it from GitHub when absent), so that is done here.
$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json | $(SYSTEM_STAMP)
	@if command -v npm >/dev/null 2>&1; then \
	  cd $(NODE_DIR) && PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
	    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
	    && chmod +x node_modules/agent-browser/bin/agent-browser-linux-* \
	    && touch node_modules/.metewand-installed; \
	else echo "warning: npm not found; the Node driver paths will be reported missing"; fi

install: $(STAMP) $(SYSTEM_STAMP) $(NODE_STAMP)

system-deps: $(SYSTEM_STAMP)

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

typecheck: install
	$(VENV)/bin/mypy

# Byte-compile our own sources once: where PYTHONDONTWRITEBYTECODE is set (these machines), Python
# never caches them, and every metewand process and Python worker the suite starts would compile
# them again (`metewand browser list` 0.94 -> 0.66 s, `measure --runs 1 -- true` 246 -> 154 ms).
# compileall skips what is up to date; a stale file is only ignored, never wrong. src and the
# Python driver adapters' modules (a per-attempt adapter compiled adapter_common, raw_cdp_ops and
# raw_cdp_more, ~1,100 lines, every attempt: ~20 ms of CPU each); not the examples and test
# workers, trees whose digests runs record.
bytecode: install
	$(PY) -m compileall -q -j 0 src drivers/python >/dev/null

# Three test processes by default on any machine (a file stays on one, so its module fixtures
# start once): the suite mostly waits on engines, workers and timeouts. With two, a third of this
# 2-core host's CPU stayed idle through the run (vmstat); three took `.ci/run` from 1,076 to 811 s
# (issue 24 item 7). PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 3
pytest: install bytecode
	$(VENV)/bin/pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile --durations=25

# Lint and type checks run beside the tests (they took the first ~40 s alone, one core busy);
# any of the three failing fails `make test`. The install runs first, alone; `bytecode` is left
# to pytest's prerequisites inside (a phony target here would compile twice).
test: install
	@$(MAKE) --no-print-directory -j3 lint typecheck pytest

demo: install bytecode
	$(VENV)/bin/metewand demo

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache $(NODE_DIR)/node_modules
