# Two commands for a newcomer: `make export STACK=dev` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev
.DEFAULT_GOAL := help
OUT ?=
# Where `make export` without OUT wrote last (gitops/sample.py): check and preview default to it.
SAMPLE := build/sample/home-network-k3s

.PHONY: help export export-all check test stress bench lock clean verify-nodes

# `make` alone: every target and what it does (the `## …` after each target's prerequisites).
help:
	@echo "usage: make <target> [STACK=<stack>] [OUT=<your GitOps repository>]"
	@grep -E '^[a-z][a-z0-9-]*:.*## ' $(firstword $(MAKEFILE_LIST)) | sed -E 's/^([a-z0-9-]+):.*## (.*)$$/  \1\t\2/' | \
		awk -F'\t' '{ printf "%-16s %s\n", $$1, $$2 }'
	@echo "start with: make export STACK=prod (into a copy of the sample repository), then make test"

# Then this project itself, editable (pyproject.toml): `components`, `gitops`, `policy` import from this folder with
# no sys.path edit, and the console scripts gpu-platform-export/-preview/-verify-nodes exist in .venv/bin.
$(VENV)/.installed: requirements.txt pyproject.toml
	@echo "Creating $(VENV) and installing the pinned requirements.txt and this project (first use only; takes a minute or two) ..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

# REWRITE_HEADERS=1: the files an older export wrote get the current header, nothing else of them changes.
# SUMMARY=<file>: what the pull request changes, as Markdown for its description (outside OUT); BASE=<ref>: what it
# is measured against (default: the merge-base of HEAD with the default branch); STAGE=1: `git add` the export's paths.
# Optional flags are gathered in a variable and the recipe line is `$(strip)`ped: a continued recipe line whose
# flags are all unset would echo a dangling `\` and an empty line.
EXPORT_FLAGS = $(if $(OUT),--out $(OUT)) $(if $(SUMMARY),--summary $(SUMMARY)) $(if $(BASE),--base $(BASE)) \
	$(if $(STAGE),--stage) $(if $(REWRITE_HEADERS),--rewrite-headers)
export: $(VENV)/.installed ## export STACK (default dev) into OUT (default: a fresh copy of the sample repository)
	$(strip $(PY) -m gitops.export --stack $(STACK) $(EXPORT_FLAGS))

export-all: $(VENV)/.installed ## export every stack into OUT
	$(strip $(PY) -m gitops.export --stack all $(if $(OUT),--out $(OUT)))

# make turns the check's exit 1 (drift) into its own 2, the same as an error: CI uses scripts/drift-check instead.
check: $(VENV)/.installed ## drift check of STACK against OUT (writes nothing; CI: scripts/drift-check)
	$(PY) -m gitops.export --stack $(STACK) --out $(or $(OUT),$(SAMPLE)) --check

# Lint, type check, the direction of imports (lint-imports: pyproject.toml's contracts), then the tests; each step
# stops the run when it fails. The first run installs the developer tools
# (requirements-dev.txt: ruff, pyright with node from a PyPI wheel, and mutmut, which pyright checks mutation/ against).
# The two checks print how long they took.
# The tests run on every core (pytest-xdist, `-n auto`; a plain `pytest` runs them in one process, as mutmut does).
# pytest keeps its assertion-rewritten test modules in tests/__pycache__ (git-ignored) even where the environment sets
# PYTHONDONTWRITEBYTECODE: rewriting 55 test modules costs ~3 s of every run otherwise.
test: $(VENV)/.installed-dev ## ruff, pyright, import contracts, then the fast suite (no Go, no built tool)
	@t=$$(date +%s%N); $(VENV)/bin/ruff check . && echo "ruff: $$(( ($$(date +%s%N) - t) / 1000000 )) ms"
	@t=$$(date +%s%N); PYRIGHT_PYTHON_IGNORE_WARNINGS=1 $(VENV)/bin/pyright && \
		echo "pyright: $$(( ($$(date +%s%N) - t) / 1000000 )) ms"
	@t=$$(date +%s%N); out=$$($(VENV)/bin/lint-imports --no-cache 2>&1) || { echo "$$out"; exit 1; }; \
		echo "lint-imports: $$(echo "$$out" | grep '^Contracts:') $$(( ($$(date +%s%N) - t) / 1000000 )) ms"
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n auto

# The slow stress rounds (concurrent exports into one OUT, the kill round at every point); CI runs them after
# `make test` with STRESS_KILL_POINTS=40, a fixed-seed sample of the kill points.
stress: $(VENV)/.installed ## the slow stress rounds (concurrent exports, kills anywhere in a run)
	$(PY) -m pytest -m stress

# Figures for docs/performance.md (not a test: it prints, it asserts nothing).
bench: $(VENV)/.installed ## the figures of docs/performance.md (prints, asserts nothing)
	$(PY) bench/run.py

lock: ## re-pin requirements.txt from requirements.in
	$(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/pip install --quiet -r requirements.in
	(echo "# Generated from requirements.in by \`make lock\`; every package pinned, transitive ones included."; \
	 build/lock-venv/bin/pip freeze --exclude pip) > requirements.txt

clean: ## remove build/
	rm -rf build

# Evidence for the GPU gate: NODES=<file with `kubectl get nodes -o json` output> (or - for stdin).
NODES ?= -
VERIFY_FLAGS = $(if $(SLICES),--slices $(SLICES),$(if $(CLAIMS),--claims $(CLAIMS),$(NODES))) \
	$(if $(WRITE_EVIDENCE),--write-evidence)
verify-nodes: $(VENV)/.installed ## evidence for the GPU gate from NODES=<kubectl get nodes -o json> (WRITE_EVIDENCE=1 to keep it)
	$(strip $(PY) -m gitops.verify_nodes --stack $(STACK) $(VERIFY_FLAGS))

# Mutation testing of the safety modules listed in mutation/modules.toml (mutmut, from requirements-dev.txt): a score
# per module, equivalent mutants (mutation/equivalent.toml) left out. Takes minutes: not part of `make test` or CI.
# MODULE=policy/rules.py for one module; RESUME=1 continues an interrupted run; RECHECK=1 checks a finished run's
# survivors again against the current tests (the module itself unchanged). Work and report in build/mutate/.
# The walk judged by Flux's own build on generated repositories (tests/differential): TREES of them, on JOBS cores,
# from SEED; prints the number of trees and of disagreements and keeps each disagreeing tree in build/fuzz-walk/.
TREES ?= 2000
JOBS ?= 2
SEED ?= 30
.PHONY: fuzz-walk
fuzz-walk: tools $(VENV)/.installed ## the walk against flux build on TREES generated repositories
	PYTHONPATH=tests $(PY) -m differential.sweep --trees $(TREES) --jobs $(JOBS) --seed $(SEED) --against flux

.PHONY: mutate
mutate: $(VENV)/.installed-dev ## mutation scores of the safety modules (MODULE=... for one)
	$(strip $(PY) mutation/run.py $(if $(MODULE),--module $(MODULE)) $(if $(RESUME),--resume) $(if $(RECHECK),--recheck))

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

.PHONY: preview new-stack schema golden

# What an export would change in OUT, shaped like `pulumi preview --diff`: resource tree, field diffs, replacements
# Kubernetes forces (with what Flux will do), output changes, the program's warnings. Reads OUT only. For CI:
# `.venv/bin/gpu-platform-preview --stack prod --out <repository> --json`.
preview: $(VENV)/.installed ## offline plan of STACK against OUT, shaped like pulumi preview --diff
	$(PY) -m gitops.preview --stack $(STACK) --out $(or $(OUT),$(SAMPLE))

# A new stack: make new-stack STACK=lab NODES="lab-1 lab-2" writes Pulumi.lab.yaml from templates/Pulumi.stack.yaml
# (validated; it exports as written), then its golden tree snapshot under tests/golden/tree/lab/ for review.
new-stack: $(VENV)/.installed ## a new stack file from the template: STACK=<name> NODES="a b"
	$(PY) -m gitops.new_stack --stack $(STACK) --nodes "$(NODES)"
	GOLDEN_UPDATE=1 $(PY) -m pytest -q "tests/gitops/test_tree_golden.py::test_the_exported_tree_matches_its_golden_snapshot[$(STACK)]"

# The stack file's JSON Schema (schemas/stack/stack.schema.json), the config reference (docs/config.md) and the plugin
# flags table (docs/plugin-flags.md), from model/config.py and model/plugin_flags.py: run after changing them.
schema: $(VENV)/.installed ## regenerate the stack-file schema and docs/config.md
	$(PY) -m gitops.stack_schema

# Rewrite the golden files (tests/golden/: preview plans, whole exported trees) from the current program, after an
# intended change; review their diff like any other.
golden: $(VENV)/.installed ## rewrite the golden snapshots after an intended change (review the diff)
	GOLDEN_UPDATE=1 $(PY) -m pytest -q tests/gitops/test_preview.py tests/gitops/test_tree_golden.py

# --- the real engines (issue 19): `make tools` builds them from the Go modules pinned in tools/, `make e2e` tests
# the program on them. Neither is part of `make test`, which needs no Go.
GO ?= go
TOOLS_BIN := build/tools/bin
.PHONY: tools e2e
# Rebuilt when a file under tools/ (or the script) changes; scripts/build-tools says what it builds and how long.
TOOLS_SOURCES := $(shell find tools -type f ! -name '*-embed.json' 2>/dev/null) scripts/build-tools
tools: $(TOOLS_BIN)/.built ## build the real engines from tools/ into build/tools/bin (Go module proxy, PyPI, npm)
	@GO=$(GO) tools/pulumi-language-python/build
$(TOOLS_BIN)/.built: $(TOOLS_SOURCES)
	GO=$(GO) scripts/build-tools
	touch $@

# The policy pack's own venv (pulumi-policy pins a protobuf the program's venv must not take).
policy/.venv/.installed: policy/requirements.txt
	$(PYTHON) -m venv policy/.venv
	policy/.venv/bin/python -m pip install --quiet --disable-pip-version-check -r policy/requirements.txt
	touch $@

# The end-to-end tests: the real Pulumi CLI, provider and Flux CLI from build/tools/bin (PULUMI=/path/to/your/pulumi
# to run the Pulumi tests with a CLI of your own). Two workers, one test module each at a time (pytest-xdist,
# --dist loadfile: a module's control plane and fixtures stay in one process): the cluster tests spend most of their
# time waiting on Flux's timeouts, which the other modules' engines use. K=<words> picks tests.
e2e: tools $(VENV)/.installed policy/.venv/.installed ## the end-to-end tests on the real engines (K=<words> to pick)
	$(strip env -u KUBECONFIG $(if $(PULUMI),PULUMI=$(PULUMI)) $(PY) -m pytest -m e2e -n 2 --dist loadfile tests/e2e \
		$(if $(K),-k "$(K)"))
