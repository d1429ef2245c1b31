"""The numbers of one series, bounded: count, ranges, min/max and where, mean, first and last.

Exact up to ``EXACT_POINTS`` points; beyond, every k-th point is read and the line says
"estimated". numpy is used when it is importable (matplotlib and Plotly bring it), else plain
Python. No kernel, no IPython.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

EXACT_POINTS = 200_000  # per series: exact below, sampled above
MAX_CATEGORIES = 12  # categories named in order, the rest counted

Formatter = Callable[[float], str]


def fmt(value: Any) -> str:
    """A number as the descriptions write it: 6 significant digits, ints as ints."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)[:40]
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # the server side may have no numpy
        return None
    return numpy


def as_floats(values: Any) -> Any:
    """A float array (numpy) or list of floats; None where the values are not numbers."""
    np = _numpy()
    if np is not None:
        try:
            arr = np.asarray(values, dtype=float).ravel()
        except (TypeError, ValueError):
            return None
        return arr
    out = []
    for v in values:
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            return None
    return out


def describe_series(y: Any, x: Any = None, x_fmt: Formatter = fmt, y_fmt: Formatter = fmt, label: str = "y") -> str:
    """One line of numbers for y (and x, when given, of the same length); ``label`` names the values."""
    ys = as_floats(y)
    if ys is None:
        return f"{len(y)} values (not numbers)"
    n = len(ys)
    if n == 0:
        return "no points"
    xs = as_floats(x) if x is not None else None
    if x is not None and xs is None and len(x) == n:  # categories: positions named by their labels
        names = [str(v)[:40] for v in x]
        xs, x_fmt = as_floats(range(n)), lambda i: names[int(i)]
    if xs is not None and len(xs) != n:
        xs = None
    step = 1 if n <= EXACT_POINTS else math.ceil(n / EXACT_POINTS)
    if step > 1:
        ys = ys[::step]
        xs = xs[::step] if xs is not None else None
    stats = _stats(ys)
    parts = [f"{n} points"]
    if xs is not None:
        xr = _stats(xs)
        if xr["finite"]:
            parts.append(f"x {x_fmt(xr['min'])} to {x_fmt(xr['max'])}")
    if not stats["finite"]:
        parts.append(f"no finite {label} value")
    else:
        at = (lambda i: f" at x={x_fmt(xs[i])}") if xs is not None else (lambda i: f" at index {i * step}")
        parts.append(
            f"{label} min {y_fmt(stats['min'])}{at(stats['argmin'])}, max {y_fmt(stats['max'])}{at(stats['argmax'])}"
        )
        parts.append(f"mean {fmt(stats['mean'])}")
        parts.append(f"first {y_fmt(ys[0])}, last {y_fmt(ys[-1])}")
    if stats["nan"] or stats["inf"]:
        parts.append(f"{stats['nan']} NaN and {stats['inf']} infinite values not counted")
    line = "; ".join(parts)
    if step > 1:
        line += f" (estimated from every {step}th point)"
    return line


def _stats(values: Any) -> dict[str, Any]:
    np = _numpy()
    if np is not None and isinstance(values, np.ndarray):
        finite = np.isfinite(values)
        nan = int(np.isnan(values).sum())
        inf = int(len(values) - finite.sum() - nan)
        if not finite.any():
            return {"finite": 0, "nan": nan, "inf": inf}
        masked_min = np.where(finite, values, np.inf)
        masked_max = np.where(finite, values, -np.inf)
        i_min, i_max = int(masked_min.argmin()), int(masked_max.argmax())
        mean = float(values[finite].mean())
        return {
            "finite": int(finite.sum()),
            "nan": nan,
            "inf": inf,
            "min": float(values[i_min]),
            "max": float(values[i_max]),
            "argmin": i_min,
            "argmax": i_max,
            "mean": mean,
        }
    good = [(i, v) for i, v in enumerate(values) if math.isfinite(v)]
    nan = sum(1 for v in values if math.isnan(v))
    if not good:
        return {"finite": 0, "nan": nan, "inf": len(values) - nan}
    i_min, v_min = min(good, key=lambda p: p[1])
    i_max, v_max = max(good, key=lambda p: p[1])
    return {
        "finite": len(good),
        "nan": nan,
        "inf": len(values) - len(good) - nan,
        "min": v_min,
        "max": v_max,
        "argmin": i_min,
        "argmax": i_max,
        "mean": sum(v for _, v in good) / len(good),
    }


def categories(values: Sequence[Any], limit: int = MAX_CATEGORIES) -> str:
    """Distinct values in first-seen order, bounded: 'a, b, c (+4 more)'."""
    seen: dict[str, None] = {}
    for v in values:
        seen.setdefault(str(v)[:40], None)
        if len(seen) > 10_000:
            break
    names = list(seen)
    head = ", ".join(names[:limit])
    return head + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def clip(text: str, limit: int) -> str:
    """``text`` bounded to ``limit`` characters, saying so when cut."""
    if len(text) <= limit:
        return text
    note = f"\n[description cut at {limit} of {len(text)} characters]"
    return text[: max(0, limit - len(note))].rstrip() + note
