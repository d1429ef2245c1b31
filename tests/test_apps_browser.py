"""The MCP Apps views in a real browser: a host page built on the official Apps SDK (AppBridge) and
the official TypeScript client, connected to a real kernel's hub, in Debian's chromium driven by
Playwright. Each view renders, the frame explorer pages deep into a 1,000,000-row pandas frame
and a lazy DuckDB relation, the output viewer shows a plot and keeps kernel HTML as text, the
changes feed shows a cell's change and opens its view; no token reaches a view, no CSP violation.

Figures (printed, not asserted): view load, a deep page after a jump. Screenshots go to
tests/artifacts/apps-*.png."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
HOST_DIR = HERE / "apps_host"
ARTIFACTS = HERE / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no chromium at {CHROMIUM}"),
    pytest.mark.timeout(300),
]
playwright_api = pytest.importorskip("playwright.sync_api")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def host_page() -> Iterator[str]:
    """The test host, served from a loopback origin (another origin than the hub's: CORS applies)."""
    if not (HOST_DIR / "dist" / "host.js").exists():
        pytest.fail("tests/apps_host/dist/host.js is missing: run `node views/build.mjs --host` (scripts/test.sh does)")
    handler = functools.partial(_Quiet, directory=str(HOST_DIR))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def notebook(kernel, hub) -> dict[str, Any]:
    kernel.run(
        "import numpy as np, pandas as pd\n"
        "rng = np.random.default_rng(7)\n"
        "big = pd.DataFrame({'n': np.arange(1_000_000), 'x': np.where(np.arange(1_000_000) % 7 == 0, np.nan,"
        " rng.random(1_000_000).round(4)), 'word': ['w%d' % (i % 1000) for i in range(1_000_000)]})"
    )
    kernel.run("import duckdb\nduck = duckdb.sql('select range as i, range % 97 as m from range(1000000)')")
    kernel.run(
        "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]); plt.title('apps plot'); plt.show()"
    )
    plot_seq = _last_seq(kernel)
    kernel.run("print('<img src=x onerror=\"window.__pwned=1\"> and <b>bold</b>')")
    html_seq = _last_seq(kernel)
    kernel.run(
        "from IPython.display import HTML, display\n"
        "display(HTML('<img src=x onerror=\"window.__pwned=2\"><b>rich</b>'))\n"
        "display({'text/html': '<img src=x onerror=\"window.__pwned=3\"><i>html only</i>'}, raw=True)"
    )
    rich_seq = _last_seq(kernel)
    kernel.run(
        "def boom():\n    raise ValueError(chr(27) + '[31mred <b>bad</b>' + chr(27) + '[0m')\nboom()", check=False
    )
    error_seq = _last_seq(kernel)
    return {**hub, "plot_seq": plot_seq, "html_seq": html_seq, "rich_seq": rich_seq, "error_seq": error_seq}


def _last_seq(kernel) -> int:
    """The seq of the cell run just before (this lookup is a captured cell too)."""
    out = kernel.run("import mcp_notebook as _m; print(_m.hub().capture.snapshot()[-1].seq)", store_history=False)
    return int(out.stdout.strip().splitlines()[-1]) - 1


@pytest.fixture
def browser_page(host_page, notebook) -> Iterator[Any]:
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.console_problems = []  # type: ignore[attr-defined]
        page.on(
            "console",
            lambda m: m.type in ("error", "warning") and page.console_problems.append(f"{m.type}: {m.text}"),  # type: ignore[attr-defined]
        )
        page.on("pageerror", lambda e: page.console_problems.append(str(e)))  # type: ignore[attr-defined]
        page.goto(host_page)
        names = page.evaluate("([u, t]) => window.host.connect(u, t)", [notebook["url"], notebook["token"]])
        assert {"explore_frame", "show_outputs", "watch_changes"} <= set(names)
        try:
            yield page
        finally:
            browser.close()


def _open(page, tool: str, args: dict[str, Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    page.evaluate("([t, a]) => window.host.open(t, a)", [tool, args])
    return page.frame_locator("#view"), start


def _view_frame(page):
    return next(f for f in page.frames if f.parent_frame is not None)


# Everything a script in the view could see: its markup, its globals (strings, and objects as
# JSON where they serialize), its address and referrer, and the URLs it has loaded.
VIEW_SURFACE = """() => {
  const seen = [document.documentElement.outerHTML, location.href, document.referrer];
  for (const key of Object.getOwnPropertyNames(window)) {
    let value;
    try { value = window[key]; } catch { continue; }
    if (typeof value === "string") seen.push(key + "=" + value);
    else if (value && typeof value === "object" && !(value instanceof Node) && value !== window) {
      try { seen.push(key + "=" + JSON.stringify(value)); } catch {}
    }
  }
  for (const entry of performance.getEntries()) seen.push(entry.name);
  return seen.join("\\n");
}"""


def _no_secrets_in_view(page, notebook) -> None:
    frame = _view_frame(page)
    surface = frame.evaluate(VIEW_SURFACE)
    assert "</html>" in surface and "data-view" in surface  # the scan saw the view
    port = notebook["url"].rsplit(":", 1)[1].split("/")[0]
    assert notebook["token"] not in surface and f":{port}" not in surface
    assert frame.evaluate("typeof window.__pwned") == "undefined"
    assert not page.console_problems, page.console_problems  # CSP violations are console errors too


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"apps-{name}.png"), full_page=True)


def _row_text(view, row: int, timeout: float = 15_000) -> list[str]:
    cells = view.locator(f'[data-row="{row}"] .cell')
    cells.first.wait_for(timeout=timeout)
    deadline = time.monotonic() + timeout / 1000
    while time.monotonic() < deadline:
        texts = cells.all_inner_texts()
        if texts and "…" not in texts:
            return texts
        time.sleep(0.05)
    raise AssertionError(f"row {row} never loaded: {cells.all_inner_texts()}")


def test_frame_explorer_pages_deep_into_a_million_rows(browser_page, notebook, kernel):
    page = browser_page
    view, start = _open(page, "explore_frame", {"name": "big"})
    first = _row_text(view, 0)
    loaded = time.perf_counter() - start
    assert first[:2] == ["0", "0"] and first[3] == "w0"
    assert "1,000,000" in view.locator('[data-testid="status"]').inner_text()
    _shot(page, "frame-explorer")

    jump = time.perf_counter()
    view.locator('[data-testid="jump"]').fill("900123")
    view.locator('[data-testid="jump"]').press("Enter")
    deep = _row_text(view, 900123)
    deep_s = time.perf_counter() - jump
    expected = kernel.run("r = big.iloc[900123]; print(int(r.n), r.x, r.word)", store_history=False).stdout.split()
    assert deep[1] == expected[0] and deep[3] == expected[2]
    assert deep[2] == ("NaN" if expected[1] == "nan" else expected[1]) or deep[2] == "null"
    _shot(page, "frame-explorer-deep")
    scroller = view.locator('[data-testid="rows"]')
    scroller.evaluate("s => { s.scrollTop = 950000 * 24; }")  # a plain scroll (24 px rows, no scaling at 1M)
    scrolled = _row_text(view, 950000)
    assert scrolled[1] == "950000" and scrolled[3] == "w0"
    status = view.locator('[data-testid="status"]')
    status.and_(view.locator('[data-loading="false"]')).wait_for(timeout=15_000)
    assert status.inner_text().startswith("rows 950,001")

    header = view.locator('[data-column="n"]')
    header.click()
    header.click()  # ascending, then descending: pushed to the hub as sort=-n
    assert _row_text(view, 0)[1] == "999999"
    assert header.get_attribute("data-sort") == "desc"
    view.locator('[data-testid="filter"]').fill("word ~ w999; n < 500000")
    view.locator('[data-testid="filter"]').press("Enter")
    assert _row_text(view, 0)[1:4:2] == ["499999", "w999"]
    assert "of 500" in view.locator('[data-testid="status"]').inner_text()
    _shot(page, "frame-explorer-sorted-filtered")
    view.locator('[data-testid="filter"]').fill("no_such_column == 1")
    view.locator('[data-testid="filter"]').press("Enter")
    problem = view.locator(".problem .error")
    problem.wait_for(timeout=15_000)
    assert "no_such_column" in problem.inner_text()
    assert view.locator('[data-testid="status"]').inner_text() == "no rows"
    view.locator('[data-testid="filter"]').fill("")
    view.locator('[data-testid="filter"]').press("Enter")  # the error goes, the rows (still sorted) come back
    assert _row_text(view, 0)[1] == "999999"
    assert view.locator(".problem .error").count() == 0
    print(
        f"\nframe explorer: tool call to first rows painted {loaded * 1000:.0f} ms; jump to row 900,123 {deep_s * 1000:.0f} ms"
    )
    _no_secrets_in_view(page, notebook)


def test_a_failing_page_is_retried_with_backoff_not_in_a_loop(browser_page, kernel):
    page = browser_page
    kernel.run("gone = pd.DataFrame({'k': range(5000)})")
    view, _ = _open(page, "explore_frame", {"name": "gone"})
    assert _row_text(view, 0)[1] == "0"
    kernel.run("del gone")
    view.locator('[data-testid="jump"]').fill("4000")
    view.locator('[data-testid="jump"]').press("Enter")
    view.locator(".problem .error").wait_for(timeout=15_000)
    time.sleep(2.5)
    reads = page.evaluate("window.host.reads").count
    assert 1 <= reads("nb://frames/gone?offset=4000&limit=100&format=json") <= 3  # asked at 0, 1 and 3 s
    kernel.run("gone = pd.DataFrame({'k': range(5000)})")
    assert _row_text(view, 4000, timeout=15_000)[1] == "4000"  # the next retry finds it again
    assert view.locator(".problem .error").count() == 0
    _shot(page, "frame-explorer-retry")


def test_frame_explorer_on_a_lazy_duckdb_relation(browser_page, notebook):
    page = browser_page
    view, start = _open(page, "explore_frame", {"name": "duck"})
    assert _row_text(view, 0)[1:] == ["0", "0"]
    view.locator('[data-testid="jump"]').fill("500000")
    view.locator('[data-testid="jump"]').press("Enter")
    row = _row_text(view, 500000, timeout=30_000)
    assert row[1:] == ["500000", str(500000 % 97)]
    print(f"\nDuckDB relation: open to row 500,000 shown {(time.perf_counter() - start) * 1000:.0f} ms")
    view.locator('[data-column="m"]').click()
    view.locator('[data-column="m"]').click()
    assert _row_text(view, 0, timeout=30_000)[2] == "96"  # an engine sort need not keep ties in order
    _shot(page, "frame-explorer-duckdb")
    _no_secrets_in_view(page, notebook)


def test_output_viewer_shows_the_plot_and_keeps_kernel_html_as_text(browser_page, notebook):
    page = browser_page
    view, _ = _open(page, "show_outputs", {"cell": notebook["plot_seq"]})
    img = view.locator("img.output-image")
    img.wait_for(timeout=15_000)
    assert img.get_attribute("src").startswith("data:image/png;base64,")
    assert view.locator("img.output-image").evaluate("i => i.complete && i.naturalWidth > 100")
    assert "apps plot" in view.locator('[data-testid="source"]').inner_text()
    _shot(page, "output-viewer-plot")

    view, _ = _open(page, "show_outputs", {"cell": notebook["html_seq"]})
    text = view.locator('[data-testid="output-text"]')
    text.wait_for(timeout=15_000)
    assert '<img src=x onerror="window.__pwned=1"> and <b>bold</b>' in text.inner_text()
    assert view.locator("img").count() == 0 and view.locator("b").count() == 0
    time.sleep(0.3)
    _shot(page, "output-viewer-text")
    _no_secrets_in_view(page, notebook)


def test_output_viewer_never_renders_html_outputs(browser_page, notebook):
    page = browser_page
    view, _ = _open(page, "show_outputs", {"cell": notebook["rich_seq"]})
    texts = view.locator('[data-testid="output-text"]')
    texts.nth(1).wait_for(timeout=15_000)
    shown = texts.all_inner_texts()
    assert shown[0] == "<IPython.core.display.HTML object>"  # the text/plain alternative
    assert shown[1] == '<img src=x onerror="window.__pwned=3"><i>html only</i>'  # no alternative: the source, as text
    assert "shown as its source text" in view.locator(".output").nth(1).inner_text()
    assert view.locator("img").count() == 0 and view.locator("b, i").count() == 0
    time.sleep(0.3)  # an onerror handler, had one been parsed, would have run by now
    _shot(page, "output-viewer-html")

    view, _ = _open(page, "show_outputs", {"cell": notebook["error_seq"]})
    view.locator(".ename").wait_for(timeout=15_000)
    assert view.locator(".ename").inner_text() == "ValueError: red <b>bad</b>"  # escapes stripped, markup kept as text
    traceback = view.locator('[data-testid="output-text"]').inner_text()
    assert "boom()" in traceback and "red <b>bad</b>" in traceback
    assert "\x1b" not in traceback and "ValueError: red <b>bad</b>" in traceback  # escapes stripped
    assert view.locator("b").count() == 0
    _shot(page, "output-viewer-error")
    _no_secrets_in_view(page, notebook)


def test_changes_feed_shows_a_cell_change_and_opens_its_view(browser_page, notebook, kernel):
    page = browser_page
    view, _ = _open(page, "watch_changes", {})
    view.locator('[data-testid="feed"]').wait_for(state="attached", timeout=15_000)
    time.sleep(0.5)  # the feed's first long poll is in flight
    ran = time.perf_counter()
    kernel.run("apps_changed = big.head(50)")
    entry = view.locator('[data-uri="nb://vars/apps_changed"]')
    entry.wait_for(timeout=15_000)
    print(f"\nchanges feed: cell end to entry shown {(time.perf_counter() - ran) * 1000:.0f} ms")
    _shot(page, "changes")
    entry.click()
    assert _row_text(view, 0)[:2] == ["0", "0"]
    assert "50 rows" in view.locator(".title").first.inner_text()
    _shot(page, "changes-opened-frame")
    view.locator('[data-testid="back"]').click()
    view.locator('[data-uri="nb://vars/apps_changed"]').wait_for(timeout=5_000)

    ran = time.perf_counter()
    kernel.run("x_new = 42")  # a plain value: no frame view, so it opens as the resource's text
    scalar = view.locator('[data-uri="nb://vars/x_new"]')
    scalar.wait_for(timeout=15_000)
    print(f"changes feed: x_new = 42 shown {(time.perf_counter() - ran) * 1000:.0f} ms after the cell")
    assert view.locator(".entry").first.locator('[data-uri="nb://vars/x_new"]').count() == 1  # newest first
    scalar.click()
    text = view.locator(".resource pre")
    text.first.wait_for(timeout=15_000)
    assert "42" in text.first.inner_text()
    view.locator('[data-testid="back"]').click()
    view.locator('[data-uri="nb://vars/apps_changed"]').wait_for(timeout=5_000)
    _no_secrets_in_view(page, notebook)


def test_a_browser_host_without_apps_sees_todays_tools(host_page, notebook):
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(host_page)
        names = page.evaluate("([u, t]) => window.host.connect(u, t, false)", [notebook["url"], notebook["token"]])
        browser.close()
    assert names == ["list_resources", "read_resource", "changes_since"]


def _ax_images(page) -> list[dict[str, str]]:
    """Every image in Chromium's own accessibility tree (DevTools protocol) of the view's frame:
    name and description. The view's frame is out of process (a sandboxed frame) or not: both asked."""
    frame = _view_frame(page)
    try:
        session, params = page.context.new_cdp_session(frame), {}
    except Exception:  # an in-process frame: the page's session, naming the frame
        session = page.context.new_cdp_session(page)
        tree = session.send("Page.getFrameTree")["frameTree"]
        params = {"frameId": next(c["frame"]["id"] for c in tree.get("childFrames", []))}
    images = []
    for node in session.send("Accessibility.getFullAXTree", params)["nodes"]:
        if (node.get("role") or {}).get("value") in ("image", "img"):
            images.append(
                {
                    "name": (node.get("name") or {}).get("value", ""),
                    "description": (node.get("description") or {}).get("value", ""),
                }
            )
    return images


def test_output_viewer_gives_a_figure_alt_text_and_its_description(browser_page, notebook):
    """Issue #44: the image's short alt text and its full description (aria-describedby), as the
    browser's accessibility tree exposes them to a screen reader."""
    page = browser_page
    view, _ = _open(page, "show_outputs", {"cell": notebook["plot_seq"]})
    view.locator("img.output-image").wait_for(timeout=15_000)
    view.locator('[data-testid="description"]').wait_for(state="attached", timeout=15_000)
    images = _ax_images(page)
    figure = [i for i in images if i["name"].startswith("matplotlib Figure")]
    assert figure, images
    assert len(figure[0]["name"]) <= 150
    assert 'Axes 1 "apps plot"' in figure[0]["description"]
    assert "3 points" in figure[0]["description"] and "max 3 at x=1" in figure[0]["description"]
