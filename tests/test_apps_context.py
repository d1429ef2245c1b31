"""The views keep the model posted (ui/update-model-context) and offer fullscreen
(ui/request-display-mode), in a real headless chromium: the test host (tests/apps_host/host.ts, on
the official AppBridge) declares the capability or not, lists display modes or not, and records
every context update and display-mode request it receives; a real kernel's hub serves the data.

Checked: nothing is pushed before the user turns a control on; a cell change then reaches the host
as a short summary made only of what the hub served (masked: a secret's value never appears),
bounded, each push replacing the previous one and rate-limited over a burst of cells; the frame
explorer shares its frame, sort, filter and a bounded sample of the visible rows; a host without the
capability shows no control and the views lose nothing; fullscreen only where the host offers it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_apps_browser import CHROMIUM, _no_secrets_in_view, _row_text, _shot, host_page, playwright_api  # noqa: F401

pytestmark = pytest.mark.timeout(300)

# The views' own bounds (views/src/context.ts, changes.ts, frame.ts).
PUSH_INTERVAL_S = 2.0
MAX_PUSH_CHARS = 8000
CHANGES_MAX_CHARS = 2000
SHARE_MAX_CHARS = 5000
SHARE_ROWS = 20
SECRET = "hunter2-correct-horse-battery"
GITHUB_TOKEN = "ghp_" + "A1b2" * 9


@pytest.fixture(scope="module")
def notebook(kernel, hub) -> dict[str, Any]:
    kernel.run(
        "import numpy as np, pandas as pd\n"
        "people = pd.DataFrame({'n': range(5000), 'word': ['w%d' % (i % 100) for i in range(5000)],"
        f" 'note': ['{GITHUB_TOKEN}' if i == 3 else 'plain %d' % i for i in range(5000)]}})\n"
        "wide = pd.DataFrame(np.arange(300 * 40).reshape(300, 40), columns=[f'col_{i}' for i in range(40)])\n"
        "longs = pd.DataFrame({'s': ['x' * 5000] * 50, 't': ['y' * 3000] * 50})"
    )
    return hub


@pytest.fixture
def page(host_page, notebook) -> Iterator[Any]:  # noqa: F811 (the fixture imported above)
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
        page.evaluate("([u, t]) => window.host.connect(u, t)", [notebook["url"], notebook["token"]])
        try:
            yield page
            assert not page.console_problems, page.console_problems  # CSP violations are console errors too
        finally:
            browser.close()


def _open(page, tool: str, args: dict[str, Any], **offers: Any):
    page.evaluate("([t, a, o]) => window.host.open(t, a, o)", [tool, args, offers])
    return page.frame_locator("#view")


def _updates(page) -> list[dict[str, Any]]:
    return page.evaluate("window.host.contextUpdates")


def _text(update: dict[str, Any]) -> str:
    content = update["params"]["content"]
    assert len(content) == 1 and content[0]["type"] == "text"  # one whole text each time: it replaces the last
    return content[0]["text"]


def _wait_push(page, want: Callable[[str], bool], after: int = 0, timeout: float = 20) -> tuple[int, str]:
    """(index, text) of the first update at or after `after` whose text satisfies `want`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        updates = _updates(page)
        for i in range(after, len(updates)):
            if want(_text(updates[i])):
                return i, _text(updates[i])
        time.sleep(0.1)
    raise AssertionError(f"no such push; received: {[_text(u)[:300] for u in _updates(page)]}")


def _quiet(page, count: int, seconds: float = PUSH_INTERVAL_S + 0.8) -> None:
    """Nothing more arrives for longer than the rate limit and settle time."""
    time.sleep(seconds)
    assert len(_updates(page)) == count, [_text(u)[:200] for u in _updates(page)[count:]]


def _lines(text: str) -> list[str]:
    """The change lines of a changes push, without their time prefix."""
    return [
        re.sub(r"^\d\d:\d\d:\d\d UTC ", "", line)
        for line in text.splitlines()
        if re.match(r"^\d\d:\d\d:\d\d UTC ", line)
    ]


def test_changes_feed_pushes_after_the_user_turns_it_on_masked_bounded_replacing(page, notebook, kernel):
    view = _open(page, "watch_changes", {}, modelContext=True)
    toggle = view.locator('[data-testid="keep-posted"]')
    toggle.wait_for(timeout=15_000)
    assert not toggle.is_checked()  # off until the user turns it on
    time.sleep(0.5)  # the feed's first long poll is in flight
    kernel.run("before_on = 1")
    view.locator('[data-uri="nb://vars/before_on"]').wait_for(timeout=15_000)
    _quiet(page, 0)  # the feed shows the change; the assistant is told nothing

    toggle.check()
    index, text = _wait_push(page, lambda t: "(no change yet)" in t)
    assert "before_on" not in text and 'changes_since {"cursor": "' in text

    kernel.run(f"db_password = {SECRET!r}\nshown_after = [1, 2, 3]\nnote = {GITHUB_TOKEN!r}")
    index, text = _wait_push(page, lambda t: "nb://vars/shown_after" in t, after=index + 1)
    entry = view.locator(".entry").filter(has=view.locator('[data-uri="nb://vars/shown_after"]'))
    served = entry.locator(".summary").all_inner_texts()
    assert _lines(text) and set(_lines(text)) <= set(served)  # only lines the hub served (masked), nothing added
    assert len(text) <= MAX_PUSH_CHARS

    kernel.run("second_change = {'a': 1}")
    index, text = _wait_push(page, lambda t: "nb://vars/second_change" in t, after=index + 1)
    _shot(page, "changes-keep-posted")
    print(f"\nwhat the changes feed pushes ({len(text)} characters):\n{text}")
    assert text.index("nb://vars/second_change") < text.index("nb://vars/shown_after")  # newest first, earlier kept

    kernel.run("for _i in range(60):\n    globals()[f'many_{_i}'] = _i")
    index, text = _wait_push(page, lambda t: "many_" in t, after=index + 1)
    assert "earlier lines not shown" in text and len(_lines(text)) <= 20
    section = text.split("\n\n", 1)[1]
    assert len(section) <= CHANGES_MAX_CHARS and len(text) <= MAX_PUSH_CHARS
    print(f"\nchanges push: {len(text)} characters after a 60-name cell ({len(_updates(page))} pushes so far)")

    everything = "\n".join(_text(u) for u in _updates(page))
    assert SECRET not in everything and GITHUB_TOKEN not in everything and notebook["token"] not in everything
    assert all(u["declared"] for u in _updates(page))

    toggle.uncheck()
    index, text = _wait_push(page, lambda t: "stopped sharing" in t, after=index + 1)
    count = len(_updates(page))
    kernel.run("after_off = 1")
    view.locator('[data-uri="nb://vars/after_off"]').wait_for(timeout=15_000)
    _quiet(page, count)
    _no_secrets_in_view(page, notebook)


def test_pushes_are_rate_limited_over_a_burst_of_cells(page, kernel):
    view = _open(page, "watch_changes", {}, modelContext=True)
    view.locator('[data-testid="keep-posted"]').check()
    first, _ = _wait_push(page, lambda t: "(no change yet)" in t)
    cells = 15
    started = time.monotonic()
    for i in range(cells):  # each cell's change reaches the feed on its own (the feed's entries show it)
        kernel.run(f"burst_{i} = {i}")
        view.locator(f'[data-uri="nb://vars/burst_{i}"]').wait_for(timeout=15_000)
        time.sleep(0.3)  # longer than the view's settle time: without the rate limit, one push per cell
    burst_s = time.monotonic() - started
    last, text = _wait_push(page, lambda t: f"nb://vars/burst_{cells - 1}" in t, after=first + 1)
    _quiet(page, last + 1)  # the final state was pushed, nothing trails it
    pushes = _updates(page)[first + 1 :]
    span_s = (pushes[-1]["at"] - pushes[0]["at"]) / 1000
    # one push per interval at most: k pushes need (k - 1) intervals (one more for delivery jitter)
    assert len(pushes) <= 2 + span_s / PUSH_INTERVAL_S, (len(pushes), span_s)
    assert len(pushes) < cells
    assert all(f"nb://vars/burst_{i}" in text for i in range(cells - 3, cells))  # the newest changes, in the last push
    print(f"\n{cells} cells in {burst_s:.1f} s: {len(pushes)} pushes over {span_s:.1f} s")


def _sample(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_frame_explorer_shares_frame_filter_sort_and_a_bounded_sample(page, notebook):
    view = _open(page, "explore_frame", {"name": "people"}, modelContext=True)
    assert _row_text(view, 3)[3] == "[REDACTED]"  # the hub masks the token in the page it serves
    share = view.locator('[data-testid="share"]')
    assert not share.is_checked()
    view.locator('[data-testid="jump"]').fill("40")
    view.locator('[data-testid="jump"]').press("Enter")
    _row_text(view, 40)
    view.locator('[data-testid="jump"]').fill("0")
    view.locator('[data-testid="jump"]').press("Enter")
    _quiet(page, 0)  # scrolling and paging push nothing while sharing is off

    share.check()
    index, text = _wait_push(page, lambda t: "nb://frames/people" in t and "sample" in t)
    assert "sort: none; filter: none" in text and "visible rows 1-" in text and "of 5,000" in text
    rows = _sample(text)
    assert 1 <= len(rows) <= SHARE_ROWS and rows[0] == {"#": 0, "n": 0, "word": "w0", "note": "plain 0"}
    assert rows[3]["note"] == "[REDACTED]"  # what the hub served, nothing of the view's own
    assert len(text) <= SHARE_MAX_CHARS + 200
    assert "read_resource nb://frames/people?offset=0&limit=" in text
    assert view.locator('[data-testid="share-state"]').inner_text().startswith("(sent ")
    _shot(page, "frame-explorer-shared")
    print(f"\nwhat the frame explorer shares ({len(text)} characters):\n{text[:900]}")

    view.locator('[data-column="n"]').click()
    view.locator('[data-column="n"]').click()  # descending
    view.locator('[data-testid="filter"]').fill("n < 1000")
    view.locator('[data-testid="filter"]').press("Enter")
    assert _row_text(view, 0)[1] == "999"
    index, text = _wait_push(page, lambda t: "filter: n < 1000" in t and "sample" in t, after=index + 1)
    assert "sort: -n" in text and "of 1,000" in text and _sample(text)[0]["n"] == 999
    assert "&sort=-n&where=n%20%3C%201000" in text

    share.uncheck()
    _wait_push(page, lambda t: "stopped sharing" in t, after=index + 1)
    everything = "\n".join(_text(u) for u in _updates(page))
    assert GITHUB_TOKEN not in everything and notebook["token"] not in everything
    _no_secrets_in_view(page, notebook)


def test_a_frame_opened_from_the_feed_shares_beside_the_changes_until_the_user_goes_back(page, kernel):
    view = _open(page, "watch_changes", {}, modelContext=True)
    view.locator('[data-testid="keep-posted"]').check()
    first, _ = _wait_push(page, lambda t: "(no change yet)" in t)
    kernel.run("picked = people.head(300)")
    index, _ = _wait_push(page, lambda t: "nb://vars/picked" in t, after=first + 1)
    view.locator('[data-uri="nb://vars/picked"]').click()
    assert _row_text(view, 0)[1] == "0"
    view.locator('[data-testid="share"]').check()
    both = lambda t: "nb://vars/picked" in t and "looking at picked" in t and "sample" in t  # noqa: E731
    index, text = _wait_push(page, both, after=index + 1)
    assert text.index("Notebook changes") < text.index("looking at picked")  # one push, both sections
    view.locator('[data-testid="back"]').click()
    index, text = _wait_push(page, lambda t: "looking at" not in t, after=index + 1)
    assert "nb://vars/picked" in text  # the frame is no longer shown, the changes still are
    assert view.locator('[data-testid="keep-posted"]').is_checked()


@pytest.mark.parametrize("name", ["wide", "longs"])
def test_frame_share_stays_bounded_on_wide_and_long_frames(page, name):
    view = _open(page, "explore_frame", {"name": name}, modelContext=True)
    _row_text(view, 0)
    view.locator('[data-testid="share"]').check()
    _, text = _wait_push(page, lambda t: f"nb://frames/{name}" in t and "sample" in t)
    rows = _sample(text)
    assert rows and len(text) <= SHARE_MAX_CHARS + 200
    if name == "wide":
        assert "the first 20 of 40 columns" in text and len(rows[0]) == 21
    else:
        assert all(len(v) <= 80 for row in rows for v in row.values() if isinstance(v, str))
        assert "more visible rows not included" in text or len(rows) <= SHARE_ROWS
    print(f"\nshare of {name}: {len(text)} characters, {len(rows)} rows")


def test_a_refused_push_is_shown_and_tried_again_on_the_next_change(page, kernel):
    view = _open(page, "watch_changes", {}, modelContext="refuse")
    view.locator('[data-testid="keep-posted"]').check()
    state = view.locator('[data-testid="keep-posted-state"]')
    _wait_push(page, lambda t: "(no change yet)" in t)
    deadline = time.monotonic() + 10
    while "Context update denied" not in state.inner_text():
        assert time.monotonic() < deadline, state.inner_text()
        time.sleep(0.1)
    kernel.run("after_refusal = 1")
    _wait_push(page, lambda t: "nb://vars/after_refusal" in t, after=1)


def test_rows_past_a_short_first_page_load(page):
    """The hub may send fewer first rows than a page (a result over the hosts' size budget): the
    explorer shows them at once and reads page 0 in full, instead of leaving its other rows empty."""
    view = _open(page, "explore_frame", {"name": "people"})
    assert _row_text(view, 0)[1] == "0"
    view.locator('[data-testid="jump"]').fill("70")
    view.locator('[data-testid="jump"]').press("Enter")
    assert _row_text(view, 70)[1] == "70"


def test_a_host_without_the_capability_shows_no_control_and_loses_nothing(page, notebook, kernel):
    view = _open(page, "watch_changes", {})
    view.locator('[data-testid="feed"]').wait_for(state="attached", timeout=15_000)
    time.sleep(0.5)
    kernel.run("no_push_here = 1")
    view.locator('[data-uri="nb://vars/no_push_here"]').wait_for(timeout=15_000)  # the feed works as before
    assert view.locator('[data-testid="keep-posted"]').count() == 0
    view.locator('[data-uri="nb://vars/no_push_here"]').click()
    view.locator(".resource pre").first.wait_for(timeout=15_000)

    view = _open(page, "explore_frame", {"name": "people"})
    assert _row_text(view, 0)[1] == "0"
    assert view.locator('[data-testid="share"]').count() == 0
    assert view.locator('[data-testid="fullscreen"]').count() == 0
    _quiet(page, 0, seconds=1.0)  # the views never asked
    assert page.evaluate("window.host.displayRequests") == []
    _no_secrets_in_view(page, notebook)


def test_fullscreen_only_where_the_host_offers_it(page, notebook):
    for modes in ([], ["inline"], ["inline", "pip"]):
        view = _open(page, "explore_frame", {"name": "people"}, displayModes=modes)
        _row_text(view, 0)
        assert view.locator('[data-testid="fullscreen"]').count() == 0, modes

    view = _open(page, "explore_frame", {"name": "people"}, displayModes=["inline", "fullscreen"])
    _row_text(view, 0)
    button = view.locator('[data-testid="fullscreen"]')
    assert button.inner_text() == "fullscreen"
    inline_height = view.locator('[data-testid="rows"]').evaluate("s => s.clientHeight")
    button.click()
    view.locator('html[data-display-mode="fullscreen"]').wait_for(state="attached", timeout=10_000)
    _shot(page, "frame-explorer-fullscreen")
    assert page.evaluate("window.host.displayRequests") == ["fullscreen"]
    assert button.inner_text() == "exit fullscreen" and button.get_attribute("aria-pressed") == "true"
    deadline = time.monotonic() + 10
    while view.locator('[data-testid="rows"]').evaluate("s => s.clientHeight") <= inline_height:
        assert time.monotonic() < deadline, "the table did not grow in fullscreen"
        time.sleep(0.1)
    _row_text(view, 25)  # more rows shown at once
    button.click()
    view.locator('html[data-display-mode="inline"]').wait_for(state="attached", timeout=10_000)
    assert page.evaluate("window.host.displayRequests") == ["fullscreen", "inline"]
    assert button.inner_text() == "fullscreen"
    assert not _updates(page)
    _no_secrets_in_view(page, notebook)
