"""Figures of known data for tests/test_figures.py: each entry's ``data`` runs in the kernel and
here, its ``draw`` in the kernel only (one cell, one figure), and ``expect`` gives the strings its
description must hold, computed here from the data with numpy (not with the package's code:
only ``fmt``, the way numbers are written, is shared)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mcp_notebook.figures.summary import fmt


@dataclass
class Fig:
    name: str
    lib: str  # the library it needs: matplotlib, pandas, seaborn, plotly, altair, ipywidgets
    data: str
    draw: str
    expect: Any  # namespace -> list[str]


def nums(y: Any, x: Any = None, xf: Any = fmt) -> list[str]:
    """What a series' line must say, from numpy over the same data."""
    y = np.asarray(y, dtype=float)
    good = np.isfinite(y)
    out = [f"{len(y)} points", f"mean {fmt(y[good].mean())}"]
    i_max = int(np.where(good, y, -np.inf).argmax())
    i_min = int(np.where(good, y, np.inf).argmin())
    if x is None:
        out += [f"max {fmt(y[i_max])} at index {i_max}", f"min {fmt(y[i_min])} at index {i_min}"]
    else:
        x = list(x)
        out += [f"max {fmt(y[i_max])} at x={xf(x[i_max])}", f"min {fmt(y[i_min])} at x={xf(x[i_min])}"]
    out.append(f"first {fmt(y[0])}, last {fmt(y[-1])}")
    return out


MPL = "import matplotlib.pyplot as plt, numpy as np\n"
LINE_X = "x = np.arange(12)\ny = (x - 5.0) ** 2\n"
TWO = "t = np.linspace(0, 6, 61)\ns = np.sin(t)\nc = np.cos(t)\n"
RNG = "rng = np.random.default_rng(7)\npx_ = rng.normal(2, 1, 40)\npy_ = rng.normal(-1, 3, 40)\n"
CATS = "cats = ['north', 'south', 'east']\nva = [3.5, 1.25, 2.0]\nvb = [1.0, 2.0, 4.0]\n"
HIST = "h = np.random.default_rng(3).normal(0, 1, 500)\n"
GRID = "g = np.arange(12.0).reshape(3, 4)\n"
BAD = "yb = np.array([1.0, np.nan, 3.0, np.inf, 2.0])\n"
DATES = "import datetime as dt\nd = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(5)]\nvd = [5.0, 7.0, 6.0, 9.0, 8.0]\n"
DF = "import pandas as pd\ndf = pd.DataFrame({'a': [1.0, 4.0, 2.0, 8.0], 'b': [3.0, 1.0, 5.0, 2.0]})\n"
LONG = "lt = pd.DataFrame({'x': [0, 1, 2, 0, 1, 2], 'y': [1.0, 3.0, 2.0, 4.0, 0.5, 6.0], 'g': ['A'] * 3 + ['B'] * 3})\n"


def _d(text: str) -> Any:
    return text


def _hist(ns: dict[str, Any], bins: int = 10) -> list[str]:
    counts, edges = np.histogram(ns["h"], bins=bins)
    return ["histogram bars", f"bins {fmt(edges[0])} to {fmt(edges[-1])}", f"{bins} points", f"max {fmt(counts.max())}"]


GALLERY: list[Fig] = [
    Fig(
        "line",
        "matplotlib",
        MPL + LINE_X,
        "plt.plot(x, y, label='parabola'); plt.title('P'); plt.legend(); plt.show()",
        lambda ns: ['Axes 1 "P"', 'line "parabola"', "Legend: parabola", *nums(ns["y"], ns["x"])],
    ),
    Fig(
        "two_lines",
        "matplotlib",
        MPL + TWO,
        "plt.plot(t, s, label='sin'); plt.plot(t, c, label='cos'); plt.legend(); plt.show()",
        lambda ns: ['line "sin"', 'line "cos"', *nums(ns["s"], ns["t"]), *nums(ns["c"], ns["t"])],
    ),
    Fig(
        "scatter",
        "matplotlib",
        MPL + RNG,
        "plt.scatter(px_, py_, label='pts'); plt.show()",
        lambda ns: ['scatter "pts"', *nums(ns["py_"], ns["px_"])],
    ),
    Fig(
        "markers",
        "matplotlib",
        MPL + LINE_X,
        "plt.plot(x, y, 'o', label='dots'); plt.show()",
        lambda ns: ['scatter (markers only) "dots"', *nums(ns["y"], ns["x"])],
    ),
    Fig(
        "bar_categories",
        "matplotlib",
        MPL + CATS,
        "plt.bar(cats, va, label='A'); plt.ylabel('units [kg]'); plt.show()",
        lambda ns: [
            "x categorical",
            "x categories: north, south, east",
            '"units [kg]"',
            "north=3.5, south=1.25, east=2",
        ],
    ),
    Fig(
        "barh",
        "matplotlib",
        MPL + CATS,
        "plt.barh(cats, vb); plt.show()",
        lambda ns: ["horizontal bars", "y categorical", "north=1, south=2, east=4"],
    ),
    Fig(
        "stacked_bars",
        "matplotlib",
        MPL + CATS,
        "plt.bar(cats, va, label='A'); plt.bar(cats, vb, bottom=va, label='B'); plt.legend(); plt.show()",
        lambda ns: ['bars "A"', 'bars "B"', "stacked on earlier bars", "north=1, south=2, east=4"],
    ),
    Fig(
        "grouped_bars",
        "matplotlib",
        MPL + CATS,
        "fig, ax = plt.subplots(); i = np.arange(3); ax.bar(i - 0.2, va, 0.4, label='A'); ax.bar(i + 0.2, vb, 0.4, label='B'); plt.show()",
        lambda ns: ['bars "A"', 'bars "B"', "-0.2=3.5, 0.8=1.25, 1.8=2", "0.2=1, 1.2=2, 2.2=4"],
    ),
    Fig("histogram", "matplotlib", MPL + HIST, "plt.hist(h, bins=10); plt.show()", _hist),
    Fig(
        "subplots_ylim",
        "matplotlib",
        MPL + TWO,
        "fig, (a1, a2) = plt.subplots(2, 1); a1.plot(t, s); a2.plot(t, c * 2); a2.set_ylim(-3, 5); a2.set_title('second'); plt.show()",
        lambda ns: ["2 axes", 'Axes 2 "second"', "y linear, -3 to 5", *nums(ns["c"] * 2, ns["t"])],
    ),
    Fig(
        "twin_axes",
        "matplotlib",
        MPL + TWO,
        "fig, ax = plt.subplots(); ax.plot(t, s, label='left'); ax2 = ax.twinx(); ax2.plot(t, c * 100, label='right'); plt.show()",
        lambda ns: ["Axes 2 (twin of axes 1)", 'line "right"', *nums(ns["c"] * 100, ns["t"])],
    ),
    Fig(
        "log_axis",
        "matplotlib",
        MPL + LINE_X,
        "plt.semilogy(x, 10.0 ** x); plt.show()",
        lambda ns: ["y log", *nums(10.0 ** ns["x"], ns["x"])],
    ),
    Fig(
        "symlog_axis",
        "matplotlib",
        MPL + LINE_X,
        "plt.plot(x, y - 10); plt.yscale('symlog'); plt.show()",
        lambda ns: ["y symlog", *nums(ns["y"] - 10, ns["x"])],
    ),
    Fig(
        "datetime_axis",
        "matplotlib",
        MPL + DATES,
        "plt.plot(d, vd, label='daily'); plt.show()",
        lambda ns: ["x datetime", "x 2024-01-01 to 2024-01-05", "max 9 at x=2024-01-04", "min 5 at x=2024-01-01"],
    ),
    Fig(
        "imshow_colorbar",
        "matplotlib",
        MPL + GRID,
        "im = plt.imshow(g); plt.colorbar(im, label='heat'); plt.show()",
        lambda ns: ["image/heatmap 3x4", "12 points", "value min 0", "max 11", "mean 5.5", "Colorbar 'heat': 0 to 11"],
    ),
    Fig(
        "pcolormesh",
        "matplotlib",
        MPL + GRID,
        "plt.pcolormesh(g); plt.show()",
        lambda ns: ["heatmap (mesh)", "12 cells", "max 11", "mean 5.5"],
    ),
    Fig(
        "nan_inf",
        "matplotlib",
        MPL + BAD,
        "plt.plot(yb, label='gappy'); plt.show()",
        lambda ns: ["5 points", "1 NaN and 1 infinite values not counted", "max 3 at x=2", "mean 2"],
    ),
    Fig(
        "empty_axes",
        "matplotlib",
        MPL,
        "fig, ax = plt.subplots(); ax.set_title('nothing'); plt.show()",
        lambda ns: ['Axes 1 "nothing"', "No data drawn."],
    ),
    Fig(
        "pie",
        "matplotlib",
        MPL,
        "plt.pie([1, 2, 1], labels=['a', 'b', 'c']); plt.show()",
        lambda ns: ["pie: 3 wedges", "a 25%", "b 50%", "c 25%"],
    ),
    Fig(
        "fill_between",
        "matplotlib",
        MPL + TWO,
        "plt.fill_between(t, 0, s + 1, label='band'); plt.show()",
        lambda ns: ['area (filled) "band"', f"y 0 to {fmt((ns['s'] + 1).max())}"],
    ),
    Fig(
        "annotated",
        "matplotlib",
        MPL + LINE_X,
        "plt.plot(x, y); plt.annotate('minimum', (5, 0)); plt.text(0, 20, 'start'); plt.show()",
        lambda ns: ["Text: 'minimum'; 'start'"],
    ),
    Fig(
        "many_series",
        "matplotlib",
        MPL,
        "for k in range(200):\n    plt.plot([0, 1], [k, k + 1])\nplt.show()",
        lambda ns: ["192 more series (200 in all)", "All 200 lines together: 400 points; x 0 to 1; y 0 to 200"],
    ),
    Fig(
        "suptitle_labels",
        "matplotlib",
        MPL + LINE_X,
        "fig, ax = plt.subplots(); fig.suptitle('Overall'); ax.plot(x, y); ax.set_xlabel('time [s]'); ax.set_ylabel('dist [m]'); plt.show()",
        lambda ns: ['titled "Overall"', 'x "time [s]" linear', 'y "dist [m]" linear'],
    ),
    Fig(
        "errorbar",
        "matplotlib",
        MPL + LINE_X,
        "plt.errorbar(x, y, yerr=1.0, label='err'); plt.show()",
        lambda ns: ['line "err"', *nums(ns["y"], ns["x"])],
    ),
    Fig(
        "contour",
        "matplotlib",
        MPL + GRID,
        "plt.contourf(g, levels=[0, 3, 6, 9, 12]); plt.show()",
        lambda ns: ["filled contours", "5 levels, 0 to 12"],
    ),
    Fig(
        "stairs",
        "matplotlib",
        MPL,
        "plt.stairs([4, 1, 7], [0, 1, 2, 3], label='st'); plt.show()",
        lambda ns: ['steps "st"', "3 points", "max 7 at x=2.5", "bins 0 to 3"],
    ),
    Fig(
        "boxplot",
        "matplotlib",
        MPL,
        "plt.boxplot([[1, 2, 3, 4, 5, 40], [2, 4, 6, 8, 10]]); plt.show()",
        lambda ns: [
            "box plot: 2 boxes",
            "1: median 3.5, quartiles 2.25 to 4.75, whiskers 1 to 5, 1 outliers",
            "2: median 6, quartiles 4 to 8, whiskers 2 to 10",
        ],
    ),
    Fig(
        "seaborn_boxplot",
        "seaborn",
        MPL + DF + LONG,
        "import seaborn as sns\nsns.boxplot(data=lt, x='g', y='y'); plt.show()",
        lambda ns: [
            "box plot: 2 boxes",
            "A: median 2, quartiles 1.5 to 2.5, whiskers 1 to 3",
            "B: median 4, quartiles 2.25 to 5, whiskers 0.5 to 6",
        ],
    ),
    Fig(
        "pandas_lines",
        "pandas",
        MPL + DF,
        "df.plot(); plt.show()",
        lambda ns: ['line "a"', 'line "b"', *nums(ns["df"]["a"], range(4)), *nums(ns["df"]["b"], range(4))],
    ),
    Fig("pandas_bar", "pandas", MPL + DF, "df['a'].plot.bar(); plt.show()", lambda ns: ["bars", "0=1, 1=4, 2=2, 3=8"]),
    Fig("pandas_hist", "pandas", MPL + DF + HIST, "pd.Series(h).plot.hist(bins=10); plt.show()", _hist),
    Fig(
        "pandas_time_index",
        "pandas",
        MPL + DF,
        "pd.Series([5.0, 7.0, 6.0, 9.0, 8.0], index=pd.date_range('2024-03-01', periods=5)).plot(label='daily'); plt.show()",
        lambda ns: ["x datetime", "x 2024-03-01 to 2024-03-05", "max 9 at x=2024-03-04", "mean 7"],
    ),
    Fig(
        "pandas_box",
        "pandas",
        MPL + DF,
        "df.plot.box(); plt.show()",
        lambda ns: [
            "labelled ticks",
            "box plot: 2 boxes",
            "a: median 3, quartiles 1.75 to 5, whiskers 1 to 8",
            "b: median 2.5, quartiles 1.75 to 3.5, whiskers 1 to 5",
        ],
    ),
    Fig(
        "pandas_scatter",
        "pandas",
        MPL + DF,
        "df.plot.scatter(x='a', y='b'); plt.show()",
        lambda ns: ["scatter", *nums(ns["df"]["b"], ns["df"]["a"])],
    ),
    Fig(
        "seaborn_lineplot",
        "seaborn",
        MPL + DF + LONG,
        "import seaborn as sns\nsns.lineplot(data=lt, x='x', y='y', hue='g'); plt.show()",
        lambda ns: ['line "A"', 'line "B"', *nums([1.0, 3.0, 2.0], [0, 1, 2]), *nums([4.0, 0.5, 6.0], [0, 1, 2])],
    ),
    Fig(
        "seaborn_barplot",
        "seaborn",
        MPL + DF + LONG,
        "import seaborn as sns\nsns.barplot(data=lt, x='g', y='y', errorbar=None); plt.show()",
        lambda ns: ['x "g" categorical', "x categories: A, B", "A=2, B=3.5"],
    ),
    Fig(
        "seaborn_facets",
        "seaborn",
        MPL + DF + LONG,
        "import seaborn as sns\nsns.relplot(data=lt, x='x', y='y', col='g', kind='line'); plt.show()",
        lambda ns: ['"g = A"', '"g = B"', *nums([4.0, 0.5, 6.0], [0, 1, 2])],
    ),
    Fig(
        "seaborn_heatmap",
        "seaborn",
        MPL + GRID,
        "import seaborn as sns\nsns.heatmap(g); plt.show()",
        lambda ns: ["heatmap (mesh)", "12 cells", "max 11", "Colorbar: 0 to 11"],
    ),
    Fig(
        "seaborn_histplot", "seaborn", MPL + HIST, "import seaborn as sns\nsns.histplot(h, bins=10); plt.show()", _hist
    ),
    Fig(
        "plotly_lines",
        "plotly",
        DF + LONG,
        "import plotly.express as px\npx.line(lt, x='x', y='y', color='g', title='PL')",
        lambda ns: [
            'Plotly figure "PL"',
            'line "A"',
            'line "B"',
            *nums([1.0, 3.0, 2.0], [0, 1, 2]),
            *nums([4.0, 0.5, 6.0], [0, 1, 2]),
        ],
    ),
    Fig(
        "plotly_bar",
        "plotly",
        CATS,
        "import plotly.graph_objects as go\ngo.Figure(go.Bar(x=cats, y=va, name='A'))",
        lambda ns: ['bar "A"', "categories north, south, east", *nums(ns["va"], ns["cats"], str)],
    ),
    Fig(
        "plotly_facets",
        "plotly",
        DF + LONG,
        "import plotly.express as px\npx.scatter(lt, x='x', y='y', facet_col='g')",
        lambda ns: ["g=A", "g=B", "on x2/y2", *nums([4.0, 0.5, 6.0], [0, 1, 2])],
    ),
    Fig(
        "plotly_histogram",
        "plotly",
        HIST,
        "import plotly.express as px\npx.histogram(x=h, nbins=10)",
        lambda ns: ["histogram", "bins are computed by Plotly", "500 points", f"mean {fmt(ns['h'].mean())}"],
    ),
    Fig(
        "plotly_box",
        "plotly",
        DF,
        "import plotly.express as px\npx.box(df, y='a')",
        lambda ns: ["box", "quartiles and whiskers are computed by Plotly", *nums(ns["df"]["a"])],
    ),
    Fig(
        "plotly_heatmap",
        "plotly",
        GRID,
        "import plotly.graph_objects as go\ngo.Figure(go.Heatmap(z=g))",
        lambda ns: ["heatmap", "3 rows", "max 11", "mean 5.5"],
    ),
    Fig(
        "plotly_log",
        "plotly",
        LINE_X,
        "import plotly.express as px\npx.line(x=x, y=10.0 ** x, log_y=True)",
        lambda ns: ["log", *nums(10.0 ** ns["x"], ns["x"])],
    ),
    Fig(
        "altair_line",
        "altair",
        DF + LONG,
        "import altair as alt\nalt.Chart(lt).mark_line().encode(x='x:Q', y='y:Q', color='g:N')",
        lambda ns: ["line mark", "6 data rows", 'field "g" nominal; categories A, B', *nums(ns["lt"]["y"])],
    ),
    Fig(
        "altair_layered",
        "altair",
        DF + LONG,
        "import altair as alt\nb = alt.Chart(lt).encode(x='x:Q', y='y:Q')\nb.mark_line() + b.mark_point()",
        lambda ns: ["layer of 2 views", "line mark", "point mark"],
    ),
    Fig(
        "altair_concat",
        "altair",
        DF + LONG,
        "import altair as alt\nb = alt.Chart(lt)\nb.mark_bar().encode(x='g:N', y='sum(y):Q') | b.mark_point().encode(x='x:Q', y='y:Q')",
        lambda ns: ["hconcat of 2 views", "aggregate sum by g (computed here as the renderer does): A=6, B=10.5"],
    ),
    Fig(
        "altair_binned",
        "altair",
        DF + HIST,
        "import altair as alt\nalt.Chart(pd.DataFrame({'h': h})).mark_bar().encode(x=alt.X('h:Q', bin=True), y='count()')",
        lambda ns: ["binned by the renderer", "500 points", f"max {fmt(ns['h'].max())}"],
    ),
]

# Other rich outputs: bundles with no figure behind them.
RICH: list[Fig] = [
    Fig(
        "html_table",
        "pandas",
        DF,
        "df",
        lambda ns: ["HTML table as Markdown", "| a | b |", "| 3 | 8.0 | 2.0 |", "while df holds it: nb://frames/df"],
    ),
    Fig("styler", "pandas", DF, "df.style.format('{:.1f}')", lambda ns: ["HTML table as Markdown", "8.0"]),
    Fig(
        "latex",
        "matplotlib",
        "",
        "from IPython.display import Latex\nLatex(r'$\\alpha^2$')",
        lambda ns: ["LaTeX, kept as text", "\\alpha^2"],
    ),
    Fig(
        "markdown",
        "matplotlib",
        "",
        "from IPython.display import Markdown\nMarkdown('**bold** words')",
        lambda ns: ["Markdown, kept as text", "**bold** words"],
    ),
    Fig(
        "png_without_figure",
        "matplotlib",
        MPL + LINE_X,
        "import io\nfrom IPython.display import Image\nf = plt.figure(figsize=(4, 3), dpi=100); plt.plot(x, y); buf = io.BytesIO(); f.savefig(buf, format='png'); plt.close(f)\nImage(buf.getvalue())",
        lambda ns: ["no live figure object", "400x300 px"],
    ),
    Fig(
        "widget",
        "ipywidgets",
        "",
        "import ipywidgets as w\nw.IntSlider(value=3, min=0, max=10, description='n')",
        lambda ns: ["IntSlider widget", "value=3", "max=10", "description='n'"],
    ),
    Fig(
        "unknown_type",
        "matplotlib",
        "",
        "from IPython.display import display\ndisplay({'application/x-thing': 'abcd', 'text/plain': 'thing'}, raw=True)",
        lambda ns: ["nothing here describes: application/x-thing (4 characters)"],
    ),
]
