"""A description of any output from its MIME bundle alone: no kernel, no IPython, no live object.

Plotly JSON (the full data of every trace), Vega-Lite JSON (inline or named data sets; the
renderer's aggregates computed here the same way, bins left to the renderer and said so), HTML
tables as bounded Markdown, LaTeX and Markdown kept as text, images with no live object behind
them, widget views, and any other type named with its size. A Jupyter server serving a kernel
without the in-kernel hub uses the same functions (issue #43).
"""

from __future__ import annotations

import json
import re
import struct
from html.parser import HTMLParser
from typing import Any

from .summary import categories, clip, describe_series, fmt

DEFAULT_CHARS = 2000
VEGALITE = re.compile(r"application/vnd\.vegalite\.v\d+[+.]json")
VEGA = re.compile(r"application/vnd\.vega\.v\d+[+.]json")
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"
IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml")
PLAIN = {"text/plain"}
TABLE_ROWS = 15
TABLE_COLS = 10


def describe_bundle(data: dict[str, Any], limit: int = DEFAULT_CHARS) -> str | None:
    """The description of one output's bundle, or None when it is plain text already."""
    try:
        return _describe(data, limit)
    except Exception as exc:  # a bundle nobody expected: say so, never fail the read
        return f"This output could not be described ({type(exc).__name__}: {str(exc)[:160]})."


def describe_charts(data: dict[str, Any], limit: int = DEFAULT_CHARS) -> str | None:
    """A chart's JSON (Plotly, Vega-Lite) described when it is captured, before a long one is cut at
    capture; None for anything else (described from its bundle when read)."""
    if PLOTLY in data or any(VEGALITE.fullmatch(m) for m in data):
        return describe_bundle(data, limit)
    return None


def _describe(data: dict[str, Any], limit: int) -> str | None:
    types = list(data)
    if PLOTLY in data:
        return clip(describe_plotly(_json(data[PLOTLY])), limit)
    for mime in types:
        if VEGALITE.fullmatch(mime):
            return clip(describe_vegalite(_json(data[mime])), limit)
        if VEGA.fullmatch(mime):
            return clip(_vega(_json(data[mime])), limit)
    if "text/html" in data:
        embedded = _embedded_chart(_text(data["text/html"]))
        if embedded is not None:
            return clip(embedded, limit)
    if WIDGET in data:
        model = _json(data[WIDGET])
        model_id = model.get("model_id") if isinstance(model, dict) else None
        return f"A widget view (model {model_id}); its state lives in the kernel, not in this output."
    for mime in IMAGES:
        if mime in data:
            return image_without_object(mime, data[mime])
    if "text/html" in data and "<table" in _text(data["text/html"]).lower():
        return clip(html_table(_text(data["text/html"])), limit)
    for mime in ("text/markdown", "text/latex"):
        if mime in data:
            kind = "Markdown" if mime == "text/markdown" else "LaTeX"
            return clip(f"{kind}, kept as text:\n{_text(data[mime])}", limit)
    other = [m for m in types if m not in PLAIN and m != "text/html"]
    if other:
        sizes = ", ".join(f"{m} ({len(_text(data[m]))} characters)" for m in other[:5])
        return f"An output nothing here describes: {sizes}."
    return None


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _json(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return value
    try:
        return json.loads(_text(value))
    except ValueError:
        raise ValueError("its JSON is incomplete (cut at capture?)") from None


def _embedded_chart(html: str) -> str | None:
    """A chart whose HTML output carries its spec in a script: Altair's and vega-embed's
    ``(function(spec, embedOpt){…})({spec}, …)``, Plotly's ``Plotly.newPlot("id", [data], {layout}``."""
    decoder = json.JSONDecoder()
    if "vega" in html and "(function(spec, embedOpt)" in html:
        at = html.find("})({", html.find("(function(spec, embedOpt)"))
        if at >= 0:
            spec, _ = decoder.raw_decode(html, at + 3)
            return describe_vegalite(spec) + "\n(spec read from the chart's HTML output)"
    at = html.find("Plotly.newPlot(")
    if at >= 0:
        m = re.compile(r"\s*\S+?,\s*").match(html, at + len("Plotly.newPlot("))
        if m is None:
            return None
        traces, end = decoder.raw_decode(html, m.end())
        layout: Any = {}
        comma = re.compile(r"\s*,\s*").match(html, end)
        if comma is not None:
            try:
                layout, _ = decoder.raw_decode(html, comma.end())
            except ValueError:
                layout = {}
        return describe_plotly({"data": traces, "layout": layout}) + "\n(data read from the chart's HTML output)"
    return None


def image_without_object(mime: str, value: Any) -> str:
    """An image with nothing behind it (a PNG from savefig shown with Image, a picture)."""
    size = ""
    if mime == "image/png":
        raw = value if isinstance(value, bytes) else _b64_head(value)
        if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
            w, h = struct.unpack(">II", raw[16:24])
            size = f", {w}x{h} px"
    return (
        f"An image ({mime}{size}) with no live figure object behind it: its contents are not known "
        "as data, only as pixels."
    )


def _b64_head(value: Any) -> bytes:
    import base64
    import binascii

    try:
        return base64.b64decode(str(value).replace("\n", "")[:64])
    except (binascii.Error, ValueError):
        return b""


# -- Plotly --------------------------------------------------------------------------------
_DTYPES = {"f8": "d", "f4": "f", "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I", "i8": "q", "u8": "Q"}


def plotly_values(value: Any) -> Any:
    """A trace's array: a list, or Plotly 6's typed array {dtype, bdata} decoded."""
    if isinstance(value, dict) and "bdata" in value:
        import array
        import base64

        code = _DTYPES.get(str(value.get("dtype", "f8")))
        if code is None:
            raise ValueError(f"unknown typed array {value.get('dtype')}")
        out = array.array(code)
        out.frombytes(base64.b64decode(value["bdata"]))
        shape = value.get("shape")
        if isinstance(shape, str) and "," in shape:  # a 2-D array (heatmap z): rows
            cols = int(shape.split(",")[1])
            return [list(out[i : i + cols]) for i in range(0, len(out), cols)]
        return list(out)
    return value


def describe_plotly(fig: Any) -> str:
    if not isinstance(fig, dict):
        raise ValueError("not a Plotly figure")
    layout = fig.get("layout") or {}
    traces = fig.get("data") or []
    lines = [f"Plotly figure{_title(layout.get('title'))}, {len(traces)} trace(s) (described from its JSON)."]
    axes = sorted(k for k in layout if re.fullmatch(r"[xy]axis\d*", k))
    for key in axes:
        ax = layout[key] or {}
        bits = [f"{key}{_title(ax.get('title'))}"]
        if ax.get("type") and ax["type"] != "-":
            bits.append(ax["type"])
        if isinstance(ax.get("range"), list) and len(ax["range"]) == 2:
            bits.append(f"range {fmt(ax['range'][0])} to {fmt(ax['range'][1])}")
        if len(bits) > 1 or _title(ax.get("title")):
            lines.append("Axis " + ", ".join(bits))
    facets = [a.get("text") for a in layout.get("annotations") or [] if isinstance(a, dict) and a.get("text")]
    if facets:
        lines.append("Annotations (facet labels and notes): " + categories(facets))
    for i, trace in enumerate(traces[:10], 1):
        try:
            lines.append(f"  trace {i}: " + _trace(trace))
        except Exception as exc:
            lines.append(f"  trace {i}: could not be read ({type(exc).__name__}: {str(exc)[:100]})")
    if len(traces) > 10:
        lines.append(f"  … {len(traces) - 10} more traces not listed.")
    return "\n".join(lines)


def _title(title: Any) -> str:
    text = title.get("text") if isinstance(title, dict) else title
    return f' "{str(text)[:100]}"' if text else ""


def _trace(trace: dict[str, Any]) -> str:
    kind = trace.get("type") or "scatter"
    mode = trace.get("mode") or ""
    if kind in ("scatter", "scattergl"):
        kind = "line" if "lines" in mode or not mode else "scatter"
    name = f' "{trace["name"]}"' if trace.get("name") else ""
    where = f" on {trace.get('xaxis', 'x')}/{trace.get('yaxis', 'y')}"
    x, y = plotly_values(trace.get("x")), plotly_values(trace.get("y"))
    if kind == "pie":
        labels, values = plotly_values(trace.get("labels")) or [], plotly_values(trace.get("values")) or []
        total = sum(float(v) for v in values) or 1.0
        shares = ", ".join(
            f"{lab} {fmt(round(float(v) * 100 / total, 2))}%" for lab, v in zip(labels, values, strict=False)
        )
        return f"pie{name}: {len(values)} slices; shares {shares}"
    if kind == "heatmap":
        z = plotly_values(trace.get("z")) or []
        flat = [v for row in z for v in (row if isinstance(row, list) else [row])]
        return f"heatmap{name}: {len(z)} rows; " + describe_series(flat, label="value")
    if kind in ("histogram", "box", "violin"):
        data, axis = (
            (x, "x")
            if x is not None and (y is None or trace.get("orientation") == "h" or kind == "histogram")
            else (y, "y")
        )
        renderer = "bins" if kind == "histogram" else "quartiles and whiskers"
        return (
            f"{kind}{name}{where}: data on {axis}: "
            + _values(data)
            + f" (the {renderer} are computed by Plotly in the browser: these are the data's numbers)"
        )
    if trace.get("orientation") == "h" and kind == "bar":
        return f"horizontal bar{name}{where}: " + _values(x, y)
    return f"{kind}{name}{where}: " + _values(y, x)


def _values(y: Any, x: Any = None) -> str:
    if y is None:
        return "no data"
    if x is not None and x and all(isinstance(v, str) for v in list(x)[:50]):
        return f"categories {categories(list(x))}; " + describe_series(y, list(x))
    return describe_series(y, x)


# -- Vega-Lite -----------------------------------------------------------------------------
def describe_vegalite(spec: Any) -> str:
    if not isinstance(spec, dict):
        raise ValueError("not a Vega-Lite spec")
    datasets = spec.get("datasets") or {}
    lines = [f"Vega-Lite chart{_title(spec.get('title'))} (described from its spec)."]
    _view(spec, datasets, None, lines, 0)
    return "\n".join(lines)


def _view(spec: dict[str, Any], datasets: dict[str, Any], rows: Any, lines: list[str], depth: int) -> None:
    rows = _rows(spec.get("data"), datasets, rows)
    pad = "  " * depth
    data = spec.get("data")
    if isinstance(data, dict) and isinstance(data.get("url"), str):
        lines.append(f"{pad}data from {data['url'][:120]} (the renderer fetches it: its values are not read here)")
    for key in ("layer", "hconcat", "vconcat", "concat"):
        if isinstance(spec.get(key), list):
            lines.append(f"{pad}{key} of {len(spec[key])} views{_title(spec.get('title'))}:")
            for sub in spec[key][:8]:
                if isinstance(sub, dict):
                    _view(sub, datasets, rows, lines, depth + 1)
            return
    if isinstance(spec.get("spec"), dict):  # facet or repeat
        how = "facet" if "facet" in spec else "repeat"
        lines.append(f"{pad}{how} by {json.dumps(spec.get('facet') or spec.get('repeat'))[:120]} of:")
        _view(spec["spec"], datasets, rows, lines, depth + 1)
        return
    mark = spec.get("mark")
    mark = mark.get("type") if isinstance(mark, dict) else mark
    enc = spec.get("encoding") or {}
    lines.append(
        f"{pad}{mark or 'view'} mark{_title(spec.get('title'))}; {len(rows) if rows is not None else 'unknown'} data rows"
    )
    for channel, e in list(enc.items())[:8]:
        if isinstance(e, dict):
            lines.append(f"{pad}  {channel}: " + _channel(e, enc, rows))


def _rows(data: Any, datasets: dict[str, Any], inherited: Any) -> Any:
    if not isinstance(data, dict):
        return inherited
    if isinstance(data.get("values"), list):
        return data["values"]
    if data.get("name") in datasets:
        return datasets[data["name"]]
    if data.get("url"):
        return None  # named only: the renderer fetches it
    return inherited


def _channel(e: dict[str, Any], enc: dict[str, Any], rows: Any) -> str:
    field = e.get("field")
    kind = {"quantitative": "quantitative", "temporal": "temporal", "nominal": "nominal", "ordinal": "ordinal"}.get(
        str(e.get("type")), str(e.get("type") or "")
    )
    bits = [f'field "{field}" {kind}'.strip() if field else (f"value {e.get('value')}" if "value" in e else "")]
    title = e.get("title")
    if title:
        bits.append(f'title "{str(title)[:60]}"')
    scale = e.get("scale")
    if isinstance(scale, dict) and scale.get("type"):
        bits.append(f"{scale['type']} scale")
    if e.get("aggregate"):
        bits.append(_aggregate(e, enc, rows))
    elif e.get("bin"):
        bits.append("binned by the renderer (Vega-Lite computes the bins): the raw values are")
        bits.append(_field_values(rows, field, kind))
    elif field and rows is not None:
        bits.append(_field_values(rows, field, kind))
    return "; ".join(b for b in bits if b)


def _field_values(rows: Any, field: Any, kind: str) -> str:
    values = [r.get(field) for r in rows if isinstance(r, dict)]
    if kind == "temporal" and values and all(isinstance(v, str) for v in values):
        return f"{len(values)} values, {min(values)} to {max(values)}"
    if kind in ("nominal", "ordinal") or (any(isinstance(v, str) for v in values[:20]) and kind != "quantitative"):
        return "categories " + categories(values)
    return describe_series([v if v is not None else float("nan") for v in values])


def _aggregate(e: dict[str, Any], enc: dict[str, Any], rows: Any) -> str:
    op, field = e["aggregate"], e.get("field")
    group = next(
        (
            v.get("field")
            for k, v in enc.items()
            if isinstance(v, dict)
            and v is not e
            and k in ("x", "y", "color")
            and v.get("type") in ("nominal", "ordinal")
            and v.get("field")
        ),
        None,
    )
    if rows is None or group is None or op not in ("sum", "mean", "count", "min", "max", "average"):
        return f"aggregate {op} computed by the renderer"
    groups: dict[str, list[float]] = {}
    for r in rows:
        if isinstance(r, dict):
            v = r.get(field) if field else 1
            if op == "count" or isinstance(v, (int, float)):
                groups.setdefault(str(r.get(group)), []).append(float(v) if op != "count" else 1.0)
    calc = {"sum": sum, "count": len, "min": min, "max": max, "mean": lambda v: sum(v) / len(v)}
    calc["average"] = calc["mean"]
    parts = [f"{g}={fmt(calc[op](v))}" for g, v in list(groups.items())[:12]]
    return f"aggregate {op} by {group} (computed here as the renderer does): " + ", ".join(parts)


def _vega(spec: Any) -> str:
    if not isinstance(spec, dict):
        raise ValueError("not a Vega spec")
    data = [d for d in spec.get("data") or [] if isinstance(d, dict)]
    sizes = ", ".join(
        f"{d.get('name')} ({len(d['values']) if isinstance(d.get('values'), list) else 'external'} rows)"
        for d in data[:8]
    )
    marks = [m.get("type") for m in spec.get("marks") or [] if isinstance(m, dict)]
    return f"Vega chart: data sets {sizes or 'none'}; marks {categories(marks) or 'none'}."


# -- HTML tables ---------------------------------------------------------------------------
class _TableReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.tables = 0
        self.after: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "table":
            self.tables += 1
        elif tag == "tr" and self.tables == 1:
            self.rows.append([])
        elif tag in ("td", "th") and self.tables == 1 and self.rows:
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split())[:40])
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)
        elif self.tables and data.strip() and len(self.after) < 4:
            self.after.append(data.strip())


def html_table(html: str) -> str:
    """The first table of an HTML output as bounded Markdown."""
    reader = _TableReader()
    reader.feed(html[:400_000])
    rows = [r for r in reader.rows if r]
    if not rows:
        return "An HTML output with an empty table."
    width = max(len(r) for r in rows)
    shown_cols = min(width, TABLE_COLS)
    out = ["HTML table as Markdown" + (f" ({' '.join(reader.after)[:80]})" if reader.after else "") + ":"]
    for i, row in enumerate(rows[: TABLE_ROWS + 1]):
        cells = [c.replace("|", "\\|") for c in row[:shown_cols]] + [""] * (shown_cols - len(row[:shown_cols]))
        out.append("| " + " | ".join(cells) + " |")
        if i == 0:
            out.append("|" + " --- |" * shown_cols)
    if len(rows) > TABLE_ROWS + 1:
        out.append(f"… {len(rows) - TABLE_ROWS - 1} more rows in the HTML.")
    if width > shown_cols:
        out.append(f"… {width - shown_cols} more columns in the HTML.")
    return "\n".join(out)
