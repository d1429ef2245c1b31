#!/usr/bin/env bash
# Refresh the documentation's screenshots from the browser tests.
#   bash scripts/docs_screenshots.sh
# Runs the JupyterLab panel test (tests/test_labextension.py) and three MCP Apps view tests
# (tests/test_apps_browser.py), which write tests/artifacts/*.png (headless chromium), then copies
# the chosen ones into docs/_static/screenshots/. Needs the test environment
# (bash scripts/test.sh --setup-only). Commit the copied files; the docs build does not run this.
# The views' pages are cropped to the view.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The venv by its real path: the panel test compares the kernel environment's script path with it.
PY=${PYTHON:-$(cd .venv && pwd -P)/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The browser tests' host page (as scripts/test.sh builds it).
if [[ ! -f tests/apps_host/dist/host.js ]]; then
  views_tmp=$(mktemp -d)
  node views/build.mjs --out "$views_tmp" --host >/dev/null
  rm -rf "$views_tmp"
fi
"$PY" -m pytest -q tests/test_labextension.py -k panel_live_document
"$PY" -m pytest -q tests/test_apps_browser.py \
  -k "million_rows or shows_the_plot or changes_feed_shows"
dest=docs/_static/screenshots
mkdir -p "$dest"
# source name in tests/artifacts -> name in the docs
while read -r src name; do
  cp "tests/artifacts/$src" "$dest/$name"
  echo "docs_screenshots: $dest/$name"
done <<'LIST'
lab-2-running.png lab-panel.png
lab-2-running-page.png lab-page.png
apps-frame-explorer.png view-frame-explorer.png
apps-frame-explorer-sorted-filtered.png view-frame-explorer-sorted.png
apps-output-viewer-plot.png view-output-viewer.png
apps-changes.png view-changes.png
LIST
# The views' screenshots are full pages: cut the blank page below and beside the view (Pillow comes
# with matplotlib, in the data extra).
"$PY" - "$dest"/view-*.png <<'PY'
import sys

from PIL import Image, ImageChops

for path in sys.argv[1:]:
    image = Image.open(path).convert("RGB")
    box = ImageChops.difference(image, Image.new("RGB", image.size, image.getpixel((0, 0)))).getbbox()
    if box:
        image.crop((0, 0, min(image.width, box[2] + 8), min(image.height, box[3] + 8))).save(path, optimize=True)
PY
