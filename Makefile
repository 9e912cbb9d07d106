# Two set-up commands: `make demo` and `make test`. Both work on a fresh machine.
#
#   make demo     install hotshard + the plot, serve and drive extras (what `hotshard demo`,
#                 `inspect --plot`, `hotshard serve` and `hotshard drive` use)
#   make test     also the spark and docs extras (+ a JRE via apt if `java` is missing) and the
#                 dev tools, then ruff, the docs site built with --strict, and the whole test suite
#   make docs     install the docs extra, build the docs site (MkDocs, mkdocs.yml) into site/
#                 with --strict: any warning (a broken link, a page not in the nav) fails it
#   make bench    also the bench extra, then the benchmarks
#   make lock     rewrite constraints.txt from what is installed in $(VENV) now (pip freeze,
#                 hotshard itself excluded). Run it after `make test` passes with new versions,
#                 e.g. after adding a dependency or `$(VENV)/bin/pip install -U <pkg>`; commit it.
#
# Every pip install is pinned with -c constraints.txt (the versions the suite was run with).
# Installs are stamped inside $(VENV): pip runs again only when pyproject.toml,
# constraints.txt or this Makefile change, or when the venv is (re)created.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
PIP     = $(BIN)/python -m pip
PIN     = -c constraints.txt
STAMP   = $(VENV)/.hotshard-installed
SUDO   := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: demo test docs install install-test lint bench lock java wrk redis prometheus chromium node venv-rebuild clean

# The venv is usable when its python runs and imports pip. If not (missing, half-created, or
# broken e.g. by its base Python going away) every stamp depends on venv-rebuild, which
# recreates it from scratch (dropping the stale stamps with it).
VENV_REBUILD := $(if $(shell $(BIN)/python -c 'import pip' >/dev/null 2>&1 && echo ok),,venv-rebuild)

venv-rebuild:
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP)-run: pyproject.toml constraints.txt Makefile $(VENV_REBUILD)
	$(PIP) install -q $(PIN) -e '.[plot,serve,drive]'
	@touch $@

$(STAMP)-test: pyproject.toml constraints.txt Makefile $(VENV_REBUILD)
	$(PIP) install -q $(PIN) -e '.[plot,spark,serve,drive,locust,docs,dev]'
	@touch $@

$(STAMP)-docs: pyproject.toml constraints.txt Makefile $(VENV_REBUILD)
	$(PIP) install -q $(PIN) -e '.[docs]'
	@touch $@

$(STAMP)-bench: pyproject.toml constraints.txt Makefile $(VENV_REBUILD)
	$(PIP) install -q $(PIN) -e '.[plot,spark,serve,drive,locust,dev,bench]'
	@touch $@

# pyspark (tests/profile/test_spark.py runs a real local Spark) needs a JVM.
java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "java not found: installing default-jre-headless (needed by pyspark) via apt"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q default-jre-headless; }

# `hotshard cluster` runs Debian's redis-server (redis-benchmark and redis-cli come with it).
redis:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1 || { \
	  echo "redis-server not found: installing redis-server and redis-tools via apt"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server redis-tools; }

# tests/observe/ start their own Prometheus, redis_exporter and node_exporter (Debian's
# prometheus 2.42, prometheus-redis-exporter and prometheus-node-exporter; no recommends).
prometheus:
	@command -v prometheus >/dev/null 2>&1 && command -v prometheus-redis-exporter >/dev/null 2>&1 \
	  && command -v prometheus-node-exporter >/dev/null 2>&1 || { \
	  echo "prometheus not found: installing prometheus, prometheus-redis-exporter and" \
	       "prometheus-node-exporter via apt"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	    prometheus prometheus-redis-exporter prometheus-node-exporter; }

# benchmarks/bench_drive.py compares the driver with wrk (Debian package `wrk`).
wrk:
	@command -v wrk >/dev/null 2>&1 || { \
	  echo "wrk not found: installing it via apt (bench_drive.py's native baseline)"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk; }

# tests/report/test_chromium.py opens the HTML report in headless Chromium (Debian `chromium`).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "chromium not found: installing it via apt (the report's rendering test)"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }

# tests/e2e/test_cli_feeders.py runs examples/k6/script.js under Node.js with stand-ins for
# k6's modules (k6 itself has no Debian package).
node:
	@command -v node >/dev/null 2>&1 || { \
	  echo "node not found: installing nodejs via apt (runs the k6 example script in the tests)"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs; }

install: redis $(STAMP)-run

install-test: java redis prometheus chromium node $(STAMP)-test

demo: install
	$(BIN)/hotshard demo

lint: install-test
	$(BIN)/ruff check src tests benchmarks

# Two passes at once. The tests marked "timing" (they assert wall-clock rates, CPU shares or
# latencies of real processes) run one at a time at normal priority; every other test runs in
# 4 processes under SCHED_IDLE (chrt --idle), inherited by the servers and commands they
# start, so it only ever takes CPU the timing tests leave idle: to a timing test the machine
# is as quiet as when it ran alone, and the timing pass (about 45% of 2 cores: it waits on
# drives and servers) no longer adds its wall time to the rest's. The timing pass's output is
# printed when both are done; the target fails if either pass fails. A test in the idle pass
# may wait seconds for CPU while a timing test saturates both cores, so it must not depend on
# promptness (generous timeouts where the timeout is not its subject); one that does is a
# timing test. The timing pass is given only the files that hold timing tests (grepped for
# `pytest.mark.timing`, which tests/conftest.py makes every timing test's file spell out), so
# it does not import the other hundred test modules. A shell starts a background job with
# SIGINT ignored; the timing pass gets it back (env --default-signal), so Ctrl-C stops both
# passes, each through its own teardown; the recipe's shell outlives the signal (trap :) to
# wait for both and show what ran. The idle pass hands out whole files, the files with the most
# slow tests first (tests/conftest.py orders them): the run ends on short files, not on a long
# one running alone on half the machine.
# Before both passes, the numba kernels are compiled once (tests/_warm_kernels.py, in two
# halves side by side): on a fresh checkout, without it, the four test processes, the timing
# pass and the commands they start each compile the same kernels at once (~35 s of CPU for
# one process) until one has written the cache; with warm caches it takes ~2 s. The second
# half then has pytest write the test modules' rewritten bytecode if any is missing or stale
# (a fresh checkout: else each of the 5 collecting processes rewrites them all, ~2.5 s of CPU
# each).
# PYTHONDONTWRITEBYTECODE is emptied for pytest and the warm-up: with it set (as on some machines), every
# run's 4 collecting processes re-rewrite the test modules' asserts and every `hotshard`
# subprocess recompiles the package (~30 s of CPU a run here); the caches go to the
# git-ignored __pycache__/ directories.
PY     = env PYTHONDONTWRITEBYTECODE= $(BIN)/python
PYTEST = $(PY) -m pytest
test: install-test
	$(BIN)/ruff check src tests benchmarks
	$(MKDOCS) build --strict -q
	@env --default-signal=INT $(PY) -m tests._warm_kernels data & data=$$!; \
	env --default-signal=INT $(PY) -m tests._warm_kernels sim tests & sim=$$!; \
	wait $$data && wait $$sim
	@timing_log=$$(mktemp); trap 'rm -f "$$timing_log"' EXIT; trap : INT TERM; \
	env --default-signal=INT $(PYTEST) -q -p no:cacheprovider -m timing \
	  $$(grep -rl --include='test_*.py' 'pytest.mark.timing' tests) >"$$timing_log" 2>&1 & \
	timing=$$!; \
	chrt --idle 0 $(PYTEST) -q -n 4 --dist loadfile --no-loadscope-reorder -m "not timing"; rest=$$?; \
	wait $$timing; timed=$$?; \
	echo "--- the timing tests (run alongside, at normal priority) ---"; \
	cat "$$timing_log"; \
	test $$rest -eq 0 && test $$timed -eq 0

# The docs site: pages under docs/, the CLI reference generated from the click commands
# (mkdocs-click) and the Python API from the docstrings (mkdocstrings); site/ is git-ignored.
# NO_MKDOCS_2_WARNING quiets mkdocs-material's banner about its successor (not a warning).
MKDOCS = env NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
docs: $(STAMP)-docs
	$(MKDOCS) build --strict

bench: java wrk redis $(STAMP)-bench
	$(BIN)/python benchmarks/bench_fit.py
	$(BIN)/python benchmarks/bench_profile.py
	$(BIN)/python benchmarks/bench_sampler.py
	$(BIN)/python benchmarks/bench_partition.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_sim.py
	$(BIN)/python benchmarks/bench_service.py
	$(BIN)/python benchmarks/bench_drive.py
	$(BIN)/python benchmarks/bench_redis_incident.py
	$(BIN)/python benchmarks/bench_locality.py
	$(BIN)/python benchmarks/bench_detectors.py

lock:
	{ echo "# Versions the test suite was run with (pip freeze of $(VENV); hotshard excluded)."; \
	  echo "# Generated by \`make lock\`: do not edit by hand. Every pip install in the Makefile uses $(PIN)."; \
	  $(PIP) freeze --exclude-editable | grep -vi '^hotshard[= @]'; } > constraints.txt.new
	if cmp -s constraints.txt.new constraints.txt; then rm constraints.txt.new; \
	else mv constraints.txt.new constraints.txt; fi

clean:
	rm -rf $(VENV) build site src/*.egg-info
