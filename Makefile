# The two commands of the README. Each builds its own environment in .venv from scratch.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/sgrld: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(BIN)/sgrld

.PHONY: demo test test-slow lint bench docs
demo: $(BIN)/sgrld  ## the main job on embedded defaults
	$(BIN)/sgrld demo

test: $(BIN)/sgrld  ## the fast test suite (CI)
	$(BIN)/python -m pytest -n 2 --dist worksteal -q -m "not slow"

test-slow: $(BIN)/sgrld  ## the long tests (-m slow), compiled as a user's run: they are runtime-bound
	SGRLD_TEST_FULL_OPTIMISATION=1 $(BIN)/python -m pytest -n 2 --dist worksteal -q -m slow

lint: $(BIN)/sgrld  ## ruff, no six or more lines copied between places (pylint's duplicate-code), mypy on the info types and the modules issue 52 split out
	$(BIN)/ruff check sgrld sgrld_app sgrld_reproductions tests benchmarks conftest.py
	$(BIN)/pylint --disable=all --enable=duplicate-code --min-similarity-lines=6 \
		--ignore-imports=yes --ignore-signatures=yes --ignore-docstrings=yes --ignore-comments=yes \
		sgrld sgrld_app sgrld_reproductions
	$(BIN)/python -m mypy --follow-imports=silent sgrld/samplers/info.py sgrld/samplers/momentum.py \
		sgrld/samplers/contract.py sgrld/samplers/freezing.py sgrld/parts/gradients.py \
		sgrld/numerics/pytrees.py sgrld/numerics/over_chains.py sgrld/numerics/jaxpr_program.py \
		sgrld/chains/sources.py sgrld/chains/chunks.py sgrld/bnn/resnet.py

bench: $(BIN)/sgrld
	$(BIN)/python benchmarks/step_throughput.py

$(BIN)/mkdocs: $(BIN)/sgrld
	$(BIN)/pip install --quiet -e ".[docs]"
	touch $(BIN)/mkdocs

docs: $(BIN)/mkdocs  ## the documentation site, into site/ (mkdocs build --strict: no warnings)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
