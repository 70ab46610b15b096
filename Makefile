# The two commands of the README:
#   make serve   install the server (only what it runs) and start it on its embedded defaults
#   make test    install what the tests need (the test extras; dovecot, Chromium and PostgreSQL
#                from Debian where missing, saying which; the MCP conformance suite from npm)
#                and run lint, types and every test
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SERVER := $(VENV)/.server
DEV := $(VENV)/.dev
SOURCES := agent bot channels cli store tools bench client tests
# The client is this repository's own distribution: locks resolve it from its folder.
LOCAL := --override client/local.txt --no-emit-package pizzabot-client

.PHONY: serve test install dev lint bench lock clean typecheck-tree

$(SERVER): requirements.lock pyproject.toml client/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==0.13.8
	$(BIN)/uv pip install -q --python $(BIN)/python -r requirements.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e ./client -e .
	touch $(SERVER)

$(DEV): $(SERVER) requirements-dev.lock
	$(BIN)/uv pip install -q --python $(BIN)/python -r requirements-dev.lock
	touch $(DEV)

install: $(SERVER)

dev: $(DEV)

serve: $(SERVER)
	$(BIN)/pizzabot serve

# mypy reads `pizzabot.*` through links to the repository's folders (the wheel maps them the
# same way; see pyproject.toml).
typecheck-tree:
	@mkdir -p .typecheck/pizzabot
	@for d in agent bot channels cli store tools; do ln -sfn ../../$$d .typecheck/pizzabot/$$d; done

lint: $(DEV) typecheck-tree
	$(BIN)/ruff check $(SOURCES)
	$(BIN)/ruff format --check $(SOURCES)
	$(BIN)/mypy

# PostgreSQL installed here has a password of its own (.ci/install-system-packages).
test: $(DEV)
	bash .ci/install-system-packages
	bash .ci/install-conformance
	bash .ci/install-mcp-servers
	$(MAKE) lint
	if [ -f .ci/pg-url ]; then export PIZZABOT_TEST_PG=$$(cat .ci/pg-url); fi; \
		$(BIN)/python -m pytest -p no:cacheprovider -n 2 --dist loadfile

bench: $(DEV)
	if [ -f .ci/pg-url ]; then set -- --postgres "$$(sed 's/+asyncpg//; s#/test$$#/postgres#' .ci/pg-url)"; fi; \
		$(BIN)/python -m bench "$$@"

# Re-pin after changing dependencies in pyproject.toml or client/pyproject.toml.
lock:
	$(BIN)/uv pip compile pyproject.toml $(LOCAL) --python-version 3.11 -q -o requirements.lock
	$(BIN)/uv pip compile pyproject.toml $(LOCAL) --extra test --extra bench --python-version 3.11 -q -o requirements-dev.lock
	$(BIN)/uv pip compile .ci/mcp-servers/requirements.in --python-version 3.11 --generate-hashes -q -o .ci/mcp-servers/requirements.lock

clean:
	rm -rf $(VENV) test-output bench-output .typecheck
