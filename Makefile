# blocklab: `make demo` and `make test` are the two commands; each sets up what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SHARED ?= ../shared
TEST_WORKERS ?= 2
# kernels are cached in .venv/numba-cache (NUMBA_CACHE_DIR overrides): kernels/_jit.py

.PHONY: help setup demo test fuzz lint bench golden fidelity docs clean tools

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP) ## create .venv, install blocklab (editable) with its dev tools, compile its kernels
	@# every kernel family compiles once per install (minutes from an empty cache; a stamp in
	@# the cache, which is keyed on the kernel sources, makes later runs a no-op)
	@# bytecode of blocklab's own modules, as pip writes it for installed packages: an editable
	@# install has none, and with PYTHONDONTWRITEBYTECODE set every command compiled its 38
	@# modules again at start-up (0.05 s of a 0.5 s ingest)
	@$(BIN)/python -m compileall -q pipeline kernels traces queries tools >/dev/null
	@$(BIN)/python -c "import sys; from blocklab.tools import warm; sys.exit(0 if warm.is_warm() else 1)" \
	  || $(BIN)/python -m blocklab.tools.warm

tools: ## install blkparse/btt/fio and chromium from Debian when missing (needs root; tests skip with a reason otherwise)
	@command -v blkparse >/dev/null && command -v btt >/dev/null && command -v fio >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    (apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq blktrace fio >/dev/null 2>&1) || \
	    echo "note: blktrace/fio not installed (not root or no apt-get)"; }
	@command -v chromium >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    (apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq chromium >/dev/null 2>&1) || \
	    echo "note: chromium not installed (not root or no apt-get)"; }

demo: setup ## a drive failure on two arrays: DDP against RAID-6 under IOR, tables and an HTML report (a few minutes)
	@mkdir -p demo-out
	$(BIN)/blocklab ingest traces/samples/tracefs-fio-loop0-vda.txt.xz -o demo-out/trace.parquet
	$(BIN)/blocklab trace stats demo-out/trace.parquet
	$(BIN)/blocklab scenario run ddp-vs-raid6 --case ddp-60 --case raid6-8x4p2 -o demo-out/ddp-vs-raid6
	$(BIN)/blocklab query demo-out/ddp-vs-raid6 compare
	$(BIN)/blocklab report demo-out/ddp-vs-raid6 -o demo-out/report.html --title "ddp-vs-raid6: one drive failed under IOR"
	@echo "open demo-out/report.html (self-contained, works offline)"

test: setup tools ## run the test suite on TEST_WORKERS processes (installs blktrace/fio when root)
	@# setup compiled every kernel family (blocklab.tools.warm), so no test compiles. Two
	@# pytest-xdist workers, a test file each at a time (module fixtures such as the Dask
	@# cluster are made once per file): CI's two cores, where one process left one idle
	@# (TEST_WORKERS=0 runs in this process, as a debugger wants); then the tests that need
	@# the machine to themselves (marker alone: capture against fio), in one process
	BLOCKLAB_SHARED=$(SHARED) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile \
	  -m "not alone"
	BLOCKLAB_SHARED=$(SHARED) $(BIN)/python -m pytest -q -m alone

fuzz: setup ## the fuzz properties with thousands of examples each (HYPOTHESIS_PROFILE=fuzz; make test runs a few hundred)
	BLOCKLAB_SHARED=$(SHARED) HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q -m fuzz \
	  --hypothesis-show-statistics

lint: setup ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/mypy pipeline traces queries tools

bench: setup tools ## throughput report (records/s, MB/s, ratio against blkparse)
	BLOCKLAB_SHARED=$(SHARED) $(BIN)/python -m blocklab.tools.bench

golden: setup ## regenerate the checked-in golden answers tests/golden/*.csv (only on purpose)
	$(BIN)/python -m tests.golden

fidelity: setup ## rerun the published array studies and rewrite docs/array-fidelity.md's table
	$(BIN)/python -m tests.fidelity_doc

docs: setup ## regenerate docs/schema.md from traces/schema.py
	$(BIN)/python -m tests.schema_doc

clean: ## remove the virtualenv and outputs
	rm -rf $(VENV) demo-out bench-out
