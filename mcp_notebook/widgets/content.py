"""Show resource contents the way a client receives them: text, JSON, tables (CSV), images.

``describe`` gives plain text (the fallback and the tests' view); ``to_html`` gives the HTML a
widget shows. Everything is bounded: a preview never renders more than a screenful.
"""

from __future__ import annotations

import csv
import html
import io
import json

from ..types import Contents

MAX_TEXT = 4000
MAX_ROWS = 30
MAX_COLS = 20


def kind_of(uri: str) -> str:
    """A resource's kind for filtering: ``vars``/``frames``/``cells``… for nb://, else its scheme."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return "other"
    if scheme == "nb":
        for stop in "/?":
            rest = rest.split(stop, 1)[0]
        return rest or "nb"
    return scheme


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"


def _pretty_json(text: str) -> str:
    """An object one key per line (compact values); multi-line strings such as a repr as blocks."""
    try:
        doc = json.loads(text)
    except ValueError:
        return text
    if not isinstance(doc, dict):
        return json.dumps(doc, indent=1, ensure_ascii=False)
    lines, blocks = [], []
    for key, value in doc.items():
        if isinstance(value, str) and "\n" in value:
            blocks.append(f"{key}:\n{value}")
        else:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False, default=str)}")
    return "\n".join(lines + blocks)


def _mime(item: Contents) -> str:
    return (item.mime_type or ("application/octet-stream" if item.blob is not None else "text/plain")).lower()


def header(item: Contents) -> str:
    size = f"{len(item.blob)} bytes" if item.blob is not None else f"{len(item.text or '')} characters"
    return f"{item.uri} · {_mime(item)} · {size}"


def describe(items: list[Contents], limit: int = MAX_TEXT) -> str:
    """Plain text of a read result: one header line per item, then its (bounded) text."""
    parts = []
    for item in items:
        parts.append(header(item))
        if item.blob is not None:
            parts.append(f"[binary {_mime(item)}, {len(item.blob)} bytes]")
        elif _mime(item).endswith("json"):
            parts.append(_clip(_pretty_json(item.text or ""), limit))
        else:
            parts.append(_clip(item.text or "", limit))
    return "\n".join(parts)


def table_rows(text: str, max_rows: int = MAX_ROWS) -> tuple[list[list[str]], bool]:
    """Parse CSV into at most ``max_rows`` rows (header included); True when rows were left out."""
    rows: list[list[str]] = []
    reader = csv.reader(io.StringIO(text))
    try:
        for row in reader:
            if len(rows) >= max_rows:
                return rows, True
            rows.append(row[:MAX_COLS])
    except csv.Error:
        return [[line] for line in text.splitlines()[:max_rows]], True
    return rows, False


def _table_html(text: str) -> str:
    rows, more = table_rows(text)
    if not rows:
        return "<i>(empty table)</i>"
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows[1:])
    tail = "<div><i>… more rows</i></div>" if more else ""
    return f"<table class='mcp-nb-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}"


def to_html(item: Contents) -> str:
    """HTML for one text item (blobs are shown by an Image widget or as a size line)."""
    mime = _mime(item)
    if item.blob is not None:
        return f"<i>binary {html.escape(mime)}, {len(item.blob)} bytes</i>"
    text = item.text or ""
    if mime == "text/csv":
        return _table_html(text)
    if mime.endswith("json"):
        text = _pretty_json(text)
    return f"<pre style='white-space: pre-wrap; margin: 0'>{html.escape(_clip(text))}</pre>"


def is_image(item: Contents) -> bool:
    return item.blob is not None and _mime(item).startswith("image/")


def error_text(exc: BaseException) -> str:
    return f"error: {type(exc).__name__}: {exc}"
