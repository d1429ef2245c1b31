#!/usr/bin/env bash
# Set up the test environment (idempotent, quick when already done) and run the tests.
#   bash scripts/test.sh [pytest args...]
#   bash scripts/test.sh --setup-only
# Creates .venv (python3 -m venv), installs the package with its test and data extras plus
# ipywidgets, installs the pinned Node tooling in tests/node (Node 22, the MCP conformance suite,
# the MCP Inspector), then runs pytest over tests/. Exit code: pytest's; "no tests ran" is an error.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
VENV_PY=.venv/bin/python

if [[ ! -x $VENV_PY ]]; then
  echo "scripts/test.sh: creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi

# Reinstall only when pyproject.toml is newer than the last successful install.
py_stamp=.venv/.mcp-notebook-test-deps
if [[ ! -f $py_stamp || pyproject.toml -nt $py_stamp ]]; then
  echo "scripts/test.sh: installing Python dependencies"
  "$VENV_PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$VENV_PY" -m pip install --quiet --disable-pip-version-check -e '.[test,data]' ipywidgets
  touch "$py_stamp"
fi

# npm writes node_modules/.package-lock.json on every install; reinstall when the lock is newer.
node_stamp=tests/node/node_modules/.package-lock.json
if [[ ! -f $node_stamp || tests/node/package-lock.json -nt $node_stamp || tests/node/package.json -nt $node_stamp ]]; then
  command -v npm >/dev/null || { echo "scripts/test.sh: npm is required to install tests/node" >&2; exit 1; }
  echo "scripts/test.sh: installing Node tooling in tests/node (npm ci)"
  (cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
fi

if [[ ${1:-} == --setup-only ]]; then
  exit 0
fi

status=0
"$VENV_PY" -m pytest -q tests "$@" || status=$?
if [[ $status -eq 5 ]]; then
  echo "scripts/test.sh: pytest collected no tests; treating that as a failure" >&2
fi

# Example notebooks under nbval: outputs that depend on timing (panel counts) are checked
# loosely; the deterministic ones strictly, with sanitizers for ports, pids and timestamps.
nb_status=0
"$VENV_PY" -m pytest -q --nbval-lax --nbval-current-env \
  notebooks/01-tour.ipynb notebooks/02-subscriptions.ipynb || nb_status=$?
"$VENV_PY" -m pytest -q --nbval --nbval-current-env \
  --nbval-sanitize-with notebooks/sanitize.cfg \
  notebooks/03-custom-resources.ipynb notebooks/04-security.ipynb || nb_status=$?
if [[ $status -eq 0 ]]; then
  status=$nb_status
fi
exit "$status"
