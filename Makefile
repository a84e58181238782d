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

.PHONY: help install system-deps test lint demo gate-G1 gate-G2 gate-G3 gate-G4 bench bench-fanout \
        bench-fio-parse bench-ttft validate clean i18n

help:  ## list the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 20

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed  ## create .venv and install kvgate with its dev extras

system-deps:  ## install fio and OpenSSH (client and server) with apt-get when missing
	@bash tools/ensure-system-deps.sh

test: install system-deps  ## run the whole test suite
	$(BIN)/pytest $(PYTEST_ARGS)

i18n: install  ## re-extract the report wording into harness/report/locale (then translate the new msgids)
	$(BIN)/python tools/i18n_extract.py

lint: install  ## ruff and mypy on harness/
	$(BIN)/ruff check harness
	$(BIN)/mypy harness

validate: install  ## validate every shipped inventory, profile and gate file
	$(KVGATE) validate inventory/*.yaml profiles/*.yaml gates/*.yaml

demo: install system-deps  ## G1 -> G2 -> G3 on localhost with the KV emulator and real fio
	$(KVGATE) demo --campaign demo-$(CAMPAIGN)

gate-G1 gate-G2 gate-G3 gate-G4: gate-%: install  ## run one gate: INVENTORY=... PROFILE=... CAMPAIGN=... [KVGATE_FLAGS=--resume]
	$(KVGATE) gate $* --inventory $(INVENTORY) --profile $(PROFILE) --campaign $(CAMPAIGN) $(KVGATE_FLAGS)

bench: bench-fanout bench-fio-parse bench-ttft  ## every benchmark, printing figures

bench-fanout: install system-deps  ## SSH fan-out to 16 loopback nodes vs one, and vs OpenSSH's ssh
	$(BIN)/python bench/fanout.py

bench-fio-parse: install  ## parse a 50 MB fio json+ document
	$(BIN)/python bench/fio_parse.py

bench-ttft: install  ## TTFT accuracy and ingest rate of the load client vs an aiohttp reference
	$(BIN)/python bench/ttft_accuracy.py

clean:  ## remove the virtualenv and caches (reports/ is kept)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
