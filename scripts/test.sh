#!/usr/bin/env bash
# Set up the test environment (idempotent, quick when already done) and run the tests.
#   bash scripts/test.sh [pytest args...]
#   bash scripts/test.sh --setup-only
# Creates .venv (Python 3.13 when present, else python3; PYTHON=... picks), installs the package with its test and data extras plus
# ipywidgets (the install builds the JupyterLab extension; rebuilt when labextension/ changes),
# installs chromium with apt when missing (browser tests), R with IRkernel and tibble likewise (kernels
# without the hub), installs the pinned Node tooling in
# tests/node (Node 22, the MCP conformance suite, the MCP Inspector), then runs pytest over tests/. Exit code: pytest's; "no tests ran" is an error.
# Then a compat pass: .venv-compat holds the oldest supported stack (Python 3.10 when available,
# ipykernel 6.29, IPython 8) and runs the kernel-facing tests; its failure fails the script too.
# COMPAT=0 skips it; COMPAT_PYTHON picks its interpreter.
# Then a portable pass: the kernel-facing and transport tests again with MCP_NOTEBOOK_PORTABLE=1 (every
# Linux-only fast path off, as macOS and Windows run); PORTABLE=0 skips it.
#   bash scripts/test.sh --clean   removes what this script and the tests built (venvs, .ci-work/,
#                                  node_modules, build outputs); pip's and npm's download caches stay.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# --- clean up (ship) ---
if [[ ${1:-} == --clean ]]; then
  for built in .venv .venv-compat .ci-work tests/node/node_modules views/node_modules labextension/node_modules \
    labextension/.yarn labextension/lib labextension/tsconfig.tsbuildinfo mcp_notebook/labextension \
    tests/apps_host/dist tests/artifacts .hypothesis .ruff_cache build dist; do
    if [[ -e $built || -L $built ]]; then echo "scripts/test.sh: removing $built ($(du -sh "$built" 2>/dev/null | cut -f1))"; rm -rf "$built"; fi
  done
  find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
  exit 0
fi
# --- end clean up ---

# The main suite runs on the newest Python we support when the machine has it (3.13: on PATH or
# pyenv's), else python3; the profiles in tests/test_install_profiles.py cover 3.10, 3.11 and 3.13.
if [[ -z ${PYTHON:-} ]]; then
  PYTHON=python3
  for candidate in python3.13 "$(pyenv root 2>/dev/null)"/versions/3.13*/bin/python3; do
    if "$candidate" -c 'import venv' >/dev/null 2>&1; then PYTHON=$candidate; break; fi
  done
fi
VENV_PY=.venv/bin/python

if [[ ! -x $VENV_PY ]]; then
  echo "scripts/test.sh: creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
elif [[ "$("$VENV_PY" -c 'import sys; print(sys.version_info[:2])')" != "$("$PYTHON" -c 'import sys; print(sys.version_info[:2])')" ]]; then
  echo "scripts/test.sh: .venv runs $("$VENV_PY" --version 2>&1), not $("$PYTHON" --version 2>&1) as the README says: to rebuild it run  rm -rf .venv && bash scripts/test.sh  (or keep it: PYTHON=$("$VENV_PY" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")') bash scripts/test.sh)"
fi

# Reinstall only when pyproject.toml is newer than the last successful install.
py_stamp=.venv/.mcp-notebook-test-deps
if [[ ! -f $py_stamp || pyproject.toml -nt $py_stamp ]]; then
  echo "scripts/test.sh: installing Python dependencies"
  "$VENV_PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$VENV_PY" -m pip install --quiet --disable-pip-version-check -e '.[test,data,plots,engines,jupyterhub,docs,kernels]' ipywidgets
  touch "$py_stamp"
fi

# The JupyterLab extension: pip install builds it (hatch-jupyter-builder runs jlpm in labextension/).
# Rebuild in place when its sources are newer than the build, and link the build into the venv.
lab_out=mcp_notebook/labextension/package.json
if [[ ! -f $lab_out || -n $(find labextension/src labextension/style labextension/package.json labextension/yarn.lock \
  -newer "$lab_out" -print -quit 2>/dev/null) ]]; then
  echo "scripts/test.sh: building the JupyterLab extension (labextension/)"
  (export PATH="$PWD/.venv/bin:$PATH" && cd labextension && jlpm install && jlpm build:prod) >/dev/null
fi
# pip install -e copies the build into the venv (shared-data); a link keeps later rebuilds visible.
if [[ ! -L .venv/share/jupyter/labextensions/mcp-notebook ]]; then
  PATH="$PWD/.venv/bin:$PATH" "$VENV_PY" -m jupyter labextension develop --overwrite . >/dev/null
fi

# The browser tests drive Debian's chromium (Playwright's own browser download is not needed).
if [[ ! -x ${CHROMIUM:-/usr/bin/chromium} ]] && command -v apt-get >/dev/null; then
  echo "scripts/test.sh: installing chromium (apt)"
  SUDO=$([[ $(id -u) -eq 0 ]] || echo sudo)
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi

# Kernels without the hub (tests/test_serverside_kernels.py): R with IRkernel and tibble from Debian
# (the package writes the "ir" kernelspec into /usr/share/jupyter/kernels); elsewhere those tests skip.
if { ! command -v R >/dev/null || [[ ! -f /usr/share/jupyter/kernels/ir/kernel.json ]] \
  || [[ ! -d /usr/lib/R/site-library/tibble ]]; } && command -v apt-get >/dev/null; then
  echo "scripts/test.sh: installing R, IRkernel and tibble (apt)"
  SUDO=$([[ $(id -u) -eq 0 ]] || echo sudo)
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends \
    r-base-core r-cran-irkernel r-cran-tibble >/dev/null
fi

# The replicated JupyterHub service's tests start a throwaway PostgreSQL and haproxy (Debian's).
if { ! command -v haproxy >/dev/null || ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null; } \
  && command -v apt-get >/dev/null; then
  echo "scripts/test.sh: installing postgresql and haproxy (apt)"
  SUDO=$([[ $(id -u) -eq 0 ]] || echo sudo)
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends postgresql haproxy >/dev/null
fi

# npm writes node_modules/.package-lock.json on every install; reinstall when the lock is newer.
node_stamp=tests/node/node_modules/.package-lock.json
if [[ ! -f $node_stamp || tests/node/package-lock.json -nt $node_stamp || tests/node/package.json -nt $node_stamp ]]; then
  command -v npm >/dev/null || { echo "scripts/test.sh: npm is required to install tests/node" >&2; exit 1; }
  echo "scripts/test.sh: installing Node tooling in tests/node (npm ci)"
  (cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
fi

# The MCP Apps views (views/): their Node tooling, and the browser tests' host page built from it.
# The views themselves are committed as built HTML (mcp_notebook/views/); tests/test_views_build.py
# rebuilds them and checks the committed files are what the sources build.
views_stamp=views/node_modules/.package-lock.json
if [[ ! -f $views_stamp || views/package-lock.json -nt $views_stamp || views/package.json -nt $views_stamp ]]; then
  echo "scripts/test.sh: installing the views' Node tooling (npm ci in views/)"
  (cd views && npm ci --no-audit --no-fund --loglevel=error)
fi
if [[ ! -f tests/apps_host/dist/host.js || -n $(find tests/apps_host/host.ts views/build.mjs views/package-lock.json -newer tests/apps_host/dist/host.js -print -quit) ]]; then
  views_tmp=$(mktemp -d)
  node views/build.mjs --out "$views_tmp" --host >/dev/null
  rm -rf "$views_tmp"
fi

# The oldest supported stack, in its own venv; reinstalled when the pins or pyproject.toml change.
COMPAT=${COMPAT:-1}
COMPAT_PY=.venv-compat/bin/python
COMPAT_PINS=(ipykernel==6.29.5 ipython==8.0.1 'ipywidgets>=8,<9' 'jupyter_client>=8,<9')
if [[ $COMPAT != 0 ]]; then
  if [[ ! -x $COMPAT_PY ]]; then
    compat_base=${COMPAT_PYTHON:-}
    if [[ -z $compat_base ]]; then  # prefer Python 3.10, the oldest the package supports
      for candidate in python3.10 "$(pyenv root 2>/dev/null)"/versions/3.10*/bin/python3 "$PYTHON"; do
        if "$candidate" --version >/dev/null 2>&1; then compat_base=$candidate; break; fi
      done
    fi
    echo "scripts/test.sh: creating .venv-compat with $("$compat_base" --version)"
    "$compat_base" -m venv .venv-compat
  fi
  compat_stamp=.venv-compat/.mcp-notebook-test-deps
  if [[ ! -f $compat_stamp || pyproject.toml -nt $compat_stamp || "$(cat "$compat_stamp")" != "${COMPAT_PINS[*]}" ]]; then
    echo "scripts/test.sh: installing the compat stack (${COMPAT_PINS[*]})"
    "$COMPAT_PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$COMPAT_PY" -m pip install --quiet --disable-pip-version-check -e '.[test,data]' "${COMPAT_PINS[@]}"
    echo "${COMPAT_PINS[*]}" >"$compat_stamp"
  fi
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
  notebooks/00-start-here.ipynb notebooks/01-tour.ipynb notebooks/02-subscriptions.ipynb || nb_status=$?
"$VENV_PY" -m pytest -q --nbval --nbval-current-env \
  --nbval-sanitize-with notebooks/sanitize.cfg \
  notebooks/03-custom-resources.ipynb notebooks/04-security.ipynb notebooks/05-lineage.ipynb notebooks/06-figures.ipynb || nb_status=$?
if [[ $status -eq 0 ]]; then
  status=$nb_status
fi

# Compat pass: the kernel-facing tests on the oldest stack (the harness starts kernels with
# sys.executable, so the kernel under test runs in .venv-compat too).
if [[ $COMPAT != 0 ]]; then
  echo "== compat: $("$COMPAT_PY" -c 'import sys, ipykernel, IPython, ipywidgets
print(f"ipykernel {ipykernel.__version__}, IPython {IPython.__version__}, ipywidgets {ipywidgets.__version__}, Python {sys.version.split()[0]}")')"
  compat_status=0
  "$COMPAT_PY" -m pytest -q tests/test_sdk_client.py tests/test_lifecycle.py tests/test_cells.py tests/test_frontend_comm.py \
    tests/test_security.py tests/test_magics.py tests/test_widgets.py tests/test_acceptance_data.py \
    tests/test_hardening_data.py tests/test_secrets_matrix.py \
    tests/test_first_hour.py tests/test_tool_watches.py tests/test_gateway.py tests/test_nsdiff.py tests/test_nswatch.py \
    tests/test_lineage.py tests/test_history.py tests/test_figures.py tests/test_driver.py tests/test_hubclient.py tests/test_http11_state.py \
    || compat_status=$?
  if [[ $compat_status -eq 5 ]]; then
    echo "scripts/test.sh: compat pass collected no tests; treating that as a failure" >&2
  fi
  if [[ $status -eq 0 ]]; then
    status=$compat_status
  fi
fi
# --- portable pass (ship): the kernel-facing and transport tests with every Linux-only fast path off
# (MCP_NOTEBOOK_PORTABLE=1: no slot-table read, no /proc, no TCP_QUICKACK, asyncio's loop, no busy
# polling), as macOS and Windows run them. About 3-4 minutes on 2 cores. PORTABLE=0 skips it.
if [[ ${PORTABLE:-1} != 0 ]]; then
  echo "== portable: MCP_NOTEBOOK_PORTABLE=1"
  portable_status=0
  MCP_NOTEBOOK_PORTABLE=1 "$VENV_PY" -m pytest -q tests/test_portable.py tests/test_sdk_client.py tests/test_cells.py \
    tests/test_http_transport.py tests/test_hardening_transport.py tests/test_fast_read.py tests/test_inline_reads.py \
    tests/test_nswatch.py tests/test_nsdiff.py tests/test_switch_interval.py tests/test_runtime_hygiene.py \
    tests/test_gateway.py tests/test_driver.py tests/test_http11_state.py || portable_status=$?
  if [[ $status -eq 0 ]]; then
    status=$portable_status
  fi
fi
# --- end portable pass ---
exit "$status"
