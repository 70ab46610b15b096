# The two commands of the README:
#   make serve   install everything and start the server on its embedded defaults
#   make test    install what the tests need (Python packages, dovecot, Chromium) and run them all
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test install lint check bench lock clean typecheck-tree

$(STAMP): requirements.lock pyproject.toml client/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==0.13.8
	$(BIN)/uv pip install -q --python $(BIN)/python -r requirements.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e ./client -e .
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/pizzabot serve

# mypy reads `pizzabot.*` through links to the repository's folders (the wheel maps them the
# same way; see pyproject.toml).
typecheck-tree:
	@mkdir -p .typecheck/pizzabot
	@for d in agent bot channels cli store tools; do ln -sfn ../../$$d .typecheck/pizzabot/$$d; done

lint: $(STAMP) typecheck-tree
	$(BIN)/ruff check agent bot channels store client tests
	$(BIN)/ruff format --check agent bot channels store client tests
	$(BIN)/mypy

test: $(STAMP)
	bash .ci/install-system-packages
	$(MAKE) lint
	$(BIN)/python -m pytest -p no:cacheprovider -n 2 --dist loadfile

bench: $(STAMP)
	$(BIN)/python -m bench

# Re-pin after changing dependencies in pyproject.toml.
lock:
	$(BIN)/uv pip compile pyproject.toml --extra test --extra bench --python-version 3.11 -q -o requirements.lock

clean:
	rm -rf $(VENV) test-output bench-output .typecheck
