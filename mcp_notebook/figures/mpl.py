"""A live matplotlib figure described in numbers: per axes its kind, title, labels, scales,
limits, legend, and each series (lines, scatters, bars, areas, images, meshes, pie wedges) with
its numbers; colorbars, texts and annotations. Reads the artists only; draws nothing.

matplotlib is imported here only when a figure is being described (it is then already loaded).
Each axes and each artist is read on its own: one that raises is named, the rest still described.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from .mpl_boxes import describe_boxes, find_boxes
from .summary import EXACT_POINTS, MAX_CATEGORIES, categories, clip, describe_series, fmt

DEFAULT_CHARS = 2000
MAX_SERIES = 8  # per axes, the rest summarised in one line
MAX_AXES = 12
MAX_TEXTS = 6


def describe_figure(fig: Any, limit: int = DEFAULT_CHARS) -> str:
    """The figure as text, at most ``limit`` characters."""
    lines = [_figure_head(fig)]
    try:
        axes = list(fig.get_axes())
    except Exception as exc:  # a figure that raises while being read
        lines.append(f"Its axes could not be read ({type(exc).__name__}: {str(exc)[:120]}).")
        return clip("\n".join(lines), limit)
    colorbars = [a for a in axes if getattr(a, "_colorbar", None) is not None]
    plots = [a for a in axes if a not in colorbars]
    if not plots:
        lines.append("No axes: nothing is drawn.")
    for i, ax in enumerate(plots[:MAX_AXES], 1):
        try:
            lines.extend(_axes(ax, i, plots))
        except Exception as exc:
            lines.append(f"Axes {i}: could not be read ({type(exc).__name__}: {str(exc)[:120]}).")
    if len(plots) > MAX_AXES:
        lines.append(f"… {len(plots) - MAX_AXES} more axes not described.")
    for cax in colorbars:
        try:
            lines.append(_colorbar(cax))
        except Exception as exc:
            lines.append(f"Colorbar: could not be read ({type(exc).__name__}).")
    return clip("\n".join(lines), limit)


def _figure_head(fig: Any) -> str:
    kind = type(fig).__name__
    head = f"matplotlib {kind}"
    try:
        w, h = fig.get_size_inches()
        head += f", {round(w * fig.dpi)}x{round(h * fig.dpi)} px"
    except Exception:
        pass
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text():
        head += f', titled "{suptitle.get_text()[:120]}"'
    try:
        n = len(fig.get_axes())
        head += f", {n} axes" if n != 1 else ", 1 axes"
    except Exception:
        pass
    return head + " (read from the live figure)."


def _scale_and_format(axis: Any, scale: str) -> tuple[str, Any]:
    """The axis' scale word and a formatter for its values (dates as ISO, categories by name)."""
    units = getattr(axis, "units", None)
    mapping = getattr(units, "_mapping", None)
    if isinstance(mapping, dict) and mapping:
        names = {float(v): str(k) for k, v in mapping.items()}
        return "categorical", lambda v: names.get(float(v), fmt(v))
    try:
        from matplotlib import dates

        formatter = axis.get_major_formatter()
        if isinstance(formatter, (dates.DateFormatter, dates.AutoDateFormatter, dates.ConciseDateFormatter)):
            return "datetime", _date_fmt
        labelled = _tick_labels(axis, formatter)
        if labelled is not None:
            return f"{scale}, labelled ticks", labelled
        freq = getattr(formatter, "freq", None)
        if freq is not None and type(formatter).__module__.startswith("pandas."):  # pandas' own time axis
            return "datetime", _period_fmt(freq)
    except Exception:
        pass
    return scale, fmt


def _tick_labels(axis: Any, formatter: Any) -> Any:
    """Positions named by fixed tick labels that are words (pandas' box plots, set_xticks with
    labels): the formatter of a FixedLocator asked for its labels."""
    from matplotlib import ticker

    locator = axis.get_major_locator()
    if not isinstance(locator, ticker.FixedLocator) or not isinstance(
        formatter, (ticker.FixedFormatter, ticker.FuncFormatter)
    ):
        return None
    locs = list(locator.locs)
    labels = [str(t) for t in formatter.format_ticks(locs)] if locs else []
    if not labels or all(_is_number(t) for t in labels):
        return None
    names = {float(loc): label for loc, label in zip(locs, labels, strict=True)}
    return lambda v: names.get(float(v), fmt(v))


def _is_number(text: str) -> bool:
    try:
        float(text.replace("\u2212", "-"))
    except ValueError:
        return not text.strip()  # an empty label names nothing
    return True


def _period_fmt(freq: Any) -> Any:
    """pandas plots a DatetimeIndex as period ordinals of its frequency: written back as dates."""

    def write(value: float) -> str:
        try:
            import pandas as pd

            stamp = pd.Period(ordinal=round(float(value)), freq=freq).start_time
            return stamp.date().isoformat() if stamp == stamp.normalize() else stamp.isoformat()
        except Exception:
            return fmt(value)

    return write


def _date_fmt(value: float) -> str:
    try:
        from matplotlib import dates

        if not math.isfinite(float(value)):
            return fmt(value)
        d = dates.num2date(value)
        if d.hour == d.minute == d.second == d.microsecond == 0:
            return d.date().isoformat()
        return d.replace(tzinfo=None).isoformat(timespec="seconds")
    except Exception:
        return fmt(value)


def _axes(ax: Any, index: int, plots: list[Any]) -> list[str]:
    xscale, xf = _scale_and_format(ax.xaxis, ax.get_xscale())
    yscale, yf = _scale_and_format(ax.yaxis, ax.get_yscale())
    head = f"Axes {index}"
    title = " / ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t)
    if title:
        head += f' "{title[:120]}"'
    twin = _twin_of(ax, plots)
    if twin:
        head += f" (twin of axes {twin})"
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    head += f": x {_label(ax.get_xlabel())}{xscale}, {xf(x0)} to {xf(x1)}; y {_label(ax.get_ylabel())}{yscale}, {yf(y0)} to {yf(y1)}"
    out = [head]
    if xscale == "categorical":
        out.append("  x categories: " + categories(list(ax.xaxis.units._mapping)))
    if yscale == "categorical":
        out.append("  y categories: " + categories(list(ax.yaxis.units._mapping)))
    series, unread = _series(ax, xf, yf)
    if not series:
        out.append("  No data drawn.")
    for line in series[:MAX_SERIES]:
        out.append("  " + line)
    total = len(series) + unread
    if total > MAX_SERIES:
        out.append(f"  … {total - MAX_SERIES} more series ({total} in all) not listed one by one.")
        out.append("  " + _guarded(_all_lines, ax, xf, yf))
    legend = ax.get_legend()
    if legend is not None:
        labels = [t.get_text() for t in legend.get_texts()]
        title_text = legend.get_title().get_text()
        out.append("  Legend" + (f' "{title_text}"' if title_text else "") + ": " + categories(labels))
    texts = [t.get_text() for t in ax.texts if t.get_text().strip()]
    if texts:
        out.append(
            "  Text: " + "; ".join(repr(t[:60]) for t in texts[:MAX_TEXTS]) + (" …" if len(texts) > MAX_TEXTS else "")
        )
    return out


def _label(text: str) -> str:
    return f'"{text[:80]}" ' if text else ""


def _twin_of(ax: Any, plots: list[Any]) -> int | None:
    for j, other in enumerate(plots, 1):
        if other is ax:
            return None
        try:
            same_box = tuple(other.get_position().bounds) == tuple(ax.get_position().bounds)
        except Exception:
            same_box = False
        if same_box and (ax.get_shared_x_axes().joined(ax, other) or ax.get_shared_y_axes().joined(ax, other)):
            return j
    return None


def _name(artist: Any, fallback: str) -> str:
    label = str(artist.get_label() or "")
    return f'"{label[:60]}"' if label and not label.startswith("_") else fallback


def _series(ax: Any, xf: Any, yf: Any) -> tuple[list[str], int]:
    out: list[str] = []
    in_containers: set[int] = set()
    labels: dict[int, str] = {}  # a line drawn by a labelled container (errorbar): the container's label
    for container in ax.containers:
        if type(container).__name__ == "ErrorbarContainer" and container.lines and container.lines[0] is not None:
            labels[id(container.lines[0])] = _name(container, "(unlabelled)") + " (with error bars)"
        for patch in getattr(container, "patches", ()) or ():
            in_containers.add(id(patch))
        if type(container).__name__ == "BarContainer":
            out.append(_guarded(_bars, container, xf, yf))
    try:
        boxes, in_boxes = find_boxes(ax)
    except Exception as exc:
        boxes, in_boxes = [], set()
        out.append(f"box plot: could not be read ({type(exc).__name__})")
    if boxes:
        out.append(describe_boxes(boxes, xf, yf))
    unread = 0  # lines past what is listed: counted, not read (all of them are summed up together)
    for line in ax.get_lines():
        if id(line) in in_boxes:
            continue
        if len(out) > MAX_SERIES:
            unread += 1
        else:
            out.append(_guarded(_line, line, xf, yf, labels.get(id(line))))
    for coll in ax.collections:
        out.append(_guarded(_collection, coll, xf, yf))
    for image in ax.get_images():
        out.append(_guarded(_image, image, xf, yf))
    wedges = [p for p in ax.patches if type(p).__name__ == "Wedge" and id(p) not in in_containers]
    if wedges:
        out.append(_guarded(_pie, wedges, ax, None))
    for patch in ax.patches:
        if type(patch).__name__ == "StepPatch" and id(patch) not in in_containers:
            out.append(_guarded(_stairs, patch, xf, yf))
    return [s for s in out if s], unread


def _stairs(patch: Any, xf: Any, yf: Any) -> str:
    """A step histogram (plt.stairs, hist(histtype='step'), seaborn's element='step')."""
    values, edges, _ = patch.get_data()
    centers = [(a + b) / 2 for a, b in itertools.pairwise(edges)]
    return (
        f"steps {_name(patch, '(unlabelled)')}: "
        + describe_series(values, centers, xf, yf)
        + f"; bins {xf(edges[0])} to {xf(edges[-1])}"
    )


def _guarded(fn: Any, artist: Any, xf: Any, yf: Any, *more: Any) -> str:
    try:
        return fn(artist, xf, yf, *more)
    except Exception as exc:
        return f"{type(artist).__name__}: could not be read ({type(exc).__name__}: {str(exc)[:100]})"


def _line(line: Any, xf: Any, yf: Any, label: str | None = None) -> str:
    xy = line.get_xydata()
    style = line.get_linestyle()
    kind = "scatter (markers only)" if style in ("None", "none", "", " ") else "line"
    return f"{kind} {label or _name(line, '(unlabelled)')}: " + describe_series(xy[:, 1], xy[:, 0], xf, yf)


def _all_lines(ax: Any, xf: Any, yf: Any) -> str:
    """What many lines span together: their points and the x and y ranges of all of them."""
    import numpy as np

    lines = ax.get_lines()
    if not lines:
        return "No lines among them."
    data = [line.get_xydata() for line in lines]
    n = sum(len(xy) for xy in data)
    step = max(1, -(-n // EXACT_POINTS))  # read every step-th point past the budget
    xy = np.concatenate([d[::step] for d in data])
    good = xy[np.isfinite(xy).all(axis=1)]
    if not len(good):
        return f"All {len(lines)} lines together: {n} points, none finite."
    x0, x1 = good[:, 0].min(), good[:, 0].max()
    return (
        f"All {len(lines)} lines together: {n} points; x {xf(x0)} to {xf(x1)}; "
        f"y {yf(good[:, 1].min())} to {yf(good[:, 1].max())}"
    ) + (f" (estimated from every {step}th point)" if step > 1 else "")


def _collection(coll: Any, xf: Any, yf: Any) -> str:
    kind = type(coll).__name__
    name = _name(coll, "(unlabelled)")
    if kind == "PathCollection":
        offsets = coll.get_offsets()
        line = f"scatter {name}: " + describe_series(offsets[:, 1], offsets[:, 0], xf, yf)
        arr = coll.get_array()
        if arr is not None and len(arr):
            line += "; colour " + describe_series(arr, label="value")
        return line
    if kind == "QuadMesh":
        arr = coll.get_array()
        return f"heatmap (mesh) {name}: {arr.size} cells; " + describe_series(arr.ravel(), label="value")
    if kind in ("PolyCollection", "FillBetweenPolyCollection"):
        verts = [p.vertices for p in coll.get_paths()]
        if not verts:
            return f"area {name}: empty"
        import numpy as np

        pts = np.concatenate(verts)
        return f"area (filled) {name}: {len(verts)} polygon(s); x {xf(pts[:, 0].min())} to {xf(pts[:, 0].max())}, y {yf(pts[:, 1].min())} to {yf(pts[:, 1].max())}"
    if kind == "LineCollection":
        segs = coll.get_segments()
        return f"line segments {name}: {len(segs)} segments"
    levels = getattr(coll, "levels", None)
    if levels is not None and len(levels):
        filled = "filled contours" if getattr(coll, "filled", False) else "contour lines"
        return f"{filled} {name}: {len(levels)} levels, {fmt(min(levels))} to {fmt(max(levels))}"
    return f"{kind} {name}: drawn (not described further)"


def _bars(container: Any, xf: Any, yf: Any) -> str:
    patches = list(container.patches)
    if not patches:
        return "bars: none"
    horizontal = getattr(container, "orientation", None) == "horizontal"
    if horizontal:
        pos = [p.get_y() + p.get_height() / 2 for p in patches]
        vals = [p.get_width() for p in patches]
        base = [p.get_x() for p in patches]
        pf, vf = yf, xf
    else:
        pos = [p.get_x() + p.get_width() / 2 for p in patches]
        vals = [p.get_height() for p in patches]
        base = [p.get_y() for p in patches]
        pf, vf = xf, yf
    label = _name(container, "(unlabelled)")
    kind = "horizontal bars" if horizontal else "bars"
    if not horizontal and _contiguous(patches):
        kind = "histogram bars"
        edges = f"; bins {fmt(patches[0].get_x())} to {fmt(patches[-1].get_x() + patches[-1].get_width())}, width {fmt(patches[0].get_width())}"
    else:
        edges = ""
    text = f"{kind} {label}: " + describe_series(vals, pos, pf, vf) + edges
    if any(b not in (0, 0.0) and not (isinstance(b, float) and math.isnan(b)) for b in base):
        text += "; stacked on earlier bars"
    if len(patches) <= MAX_CATEGORIES:
        text += "; values " + ", ".join(f"{pf(p)}={vf(v)}" for p, v in zip(pos, vals, strict=False))
    return text


def _contiguous(patches: list[Any]) -> bool:
    if len(patches) < 3:
        return False
    for a, b in itertools.pairwise(patches):
        if not math.isclose(a.get_x() + a.get_width(), b.get_x(), rel_tol=1e-9, abs_tol=1e-12):
            return False
    return True


def _image(image: Any, xf: Any, yf: Any) -> str:
    arr = image.get_array()
    shape = "x".join(str(s) for s in getattr(arr, "shape", ()))
    text = f"image/heatmap {shape}"
    if arr is not None and getattr(arr, "ndim", 0) == 2:
        text += "; " + describe_series(arr.ravel(), label="value")
        cmap = getattr(image.get_cmap(), "name", None)
        if cmap:
            text += f"; colormap {cmap}"
    else:
        text += " (RGB(A) pixels)"
    return text


def _pie(wedges: list[Any], ax: Any, _unused: Any) -> str:
    spans = [(w.theta2 - w.theta1) / 360 for w in wedges]
    labels = [t.get_text() for t in ax.texts if t.get_text() and "%" not in t.get_text()]
    if len(labels) < len(wedges):
        labels = [_name(w, f"wedge {i + 1}").strip('"') for i, w in enumerate(wedges)]
    shares = ", ".join(f"{labels[i]} {fmt(round(s * 100, 2))}%" for i, s in enumerate(spans[:MAX_CATEGORIES]))
    more = f" (+{len(wedges) - MAX_CATEGORIES} more)" if len(wedges) > MAX_CATEGORIES else ""
    return f"pie: {len(wedges)} wedges; shares {shares}{more}"


def _colorbar(cax: Any) -> str:
    cb = cax._colorbar
    norm = cb.mappable.norm
    label = cb.ax.get_ylabel() or cb.ax.get_xlabel()
    return f"Colorbar{' ' + repr(label[:60]) if label else ''}: {fmt(norm.vmin)} to {fmt(norm.vmax)}" + (
        f" ({type(norm).__name__})" if type(norm).__name__ != "Normalize" else ""
    )
