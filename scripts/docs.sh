#!/usr/bin/env bash
# Build the documentation site (docs/ -> docs/_build/html) with warnings as errors, then check its
# links without the network (-b linkcheck; http(s) links are ignored in docs/conf.py).
#   bash scripts/docs.sh [extra sphinx-build args...]
# Installs the docs extra (sphinx, myst-parser, pydata-sphinx-theme, sphinx-copybutton) into .venv
# when it is missing. PYTHON=... picks another interpreter; DOCS_OUT=... another output directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${DOCS_OUT:-docs/_build}

if ! "$PY" -c 'import sphinx, myst_parser, pydata_sphinx_theme, sphinx_copybutton' >/dev/null 2>&1; then
  echo "scripts/docs.sh: installing the docs extra"
  "$PY" -m pip install --quiet --disable-pip-version-check -e '.[docs]'
fi

"$PY" -m sphinx -E -W --keep-going -q -b html docs "$OUT/html" "$@"
"$PY" -m sphinx -W --keep-going -q -b linkcheck docs "$OUT/linkcheck" "$@"
echo "scripts/docs.sh: built $OUT/html/index.html"
