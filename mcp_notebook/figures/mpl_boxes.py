"""Box plots in a live matplotlib axes, read back as boxes: median, quartiles, whiskers, outliers.

matplotlib's ``boxplot``/``bxp`` (and pandas' ``.plot.box``) leave only lines on the axes, in a
fixed order per box: the box (a 5-point line, or a patch with ``patch_artist``), two whiskers, two
caps, the median, a mean if asked, the outliers (markers only). seaborn (0.13) keeps
a container naming each part. Both are recognised here; the lines a box consumed are reported so
they are not listed again one by one. Vertical boxes only; anything else stays plain lines.
"""

from __future__ import annotations

from typing import Any

from .summary import MAX_CATEGORIES, fmt


def _xy(line: Any) -> Any:
    return line.get_xydata()


def _vertical(line: Any) -> bool:
    xy = _xy(line)
    return len(xy) == 2 and xy[0, 0] == xy[1, 0] and xy[0, 1] != xy[1, 1]


def _horizontal(line: Any) -> bool:
    xy = _xy(line)
    return len(xy) == 2 and xy[0, 1] == xy[1, 1]


def _markers_only(line: Any) -> bool:
    return line.get_linestyle() in ("None", "none", "", " ")


def find_boxes(ax: Any) -> tuple[list[dict[str, Any]], set[int]]:
    """The boxes drawn on ``ax`` (each: x, low, q1, median, q3, high, outliers) and the ids of the
    lines they are made of."""
    boxes: list[dict[str, Any]] = []
    used: set[int] = set()
    for container in ax.containers:  # seaborn's BoxPlotContainer
        medians, whiskers = getattr(container, "medians", None), getattr(container, "whiskers", None)
        if medians and whiskers and len(whiskers) == 2 * len(medians):
            fliers = list(getattr(container, "fliers", None) or [])
            for i, median in enumerate(medians):
                flier = fliers[i] if i < len(fliers) else None
                boxes.append(_box(whiskers[2 * i], whiskers[2 * i + 1], median, flier))
            used.update(id(a) for a in getattr(container, "_children", ()))
    lines = [line for line in ax.get_lines() if id(line) not in used]
    i = 0
    while i + 4 < len(lines):
        w1, w2, c1, c2 = lines[i : i + 4]
        if not (_vertical(w1) and _vertical(w2) and _horizontal(c1) and _horizontal(c2)):
            i += 1
            continue
        j = i + 4
        if j < len(lines) and len(_xy(lines[j])) == 5:  # the box drawn as a line
            j += 1
        if j >= len(lines) or not _horizontal(lines[j]):
            i += 1
            continue
        median, part = lines[j], [w1, w2, c1, c2, *lines[i + 4 : j + 1]]
        if i > 0 and len(_xy(lines[i - 1])) == 5:  # matplotlib draws the box line first
            part.append(lines[i - 1])
        j += 1
        flier = lines[j] if j < len(lines) and _markers_only(lines[j]) else None
        if flier is not None:
            part.append(flier)
            j += 1
        boxes.append(_box(w1, w2, median, flier))
        used.update(id(line) for line in part)
        i = j
    return boxes, used


def _box(low_whisker: Any, high_whisker: Any, median: Any, flier: Any) -> dict[str, Any]:
    lo, hi, med = _xy(low_whisker), _xy(high_whisker), _xy(median)
    return {
        "x": float(med[:, 0].mean()),
        "low": float(lo[1, 1]),
        "q1": float(lo[0, 1]),
        "median": float(med[0, 1]),
        "q3": float(hi[0, 1]),
        "high": float(hi[1, 1]),
        "outliers": len(_xy(flier)) if flier is not None else 0,
    }


def describe_boxes(boxes: list[dict[str, Any]], xf: Any, yf: Any) -> str:
    """One line for the boxes of an axes."""
    parts = []
    for b in boxes[:MAX_CATEGORIES]:
        text = (
            f"{xf(b['x'])}: median {yf(b['median'])}, quartiles {yf(b['q1'])} to {yf(b['q3'])}, "
            f"whiskers {yf(b['low'])} to {yf(b['high'])}"
        )
        if b["outliers"]:
            text += f", {b['outliers']} outliers"
        parts.append(text)
    more = f" (+{len(boxes) - MAX_CATEGORIES} more)" if len(boxes) > MAX_CATEGORIES else ""
    return f"box plot: {len(boxes)} boxes; " + "; ".join(parts) + more


__all__ = ["describe_boxes", "find_boxes", "fmt"]
