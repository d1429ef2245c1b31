"""The wire budget of a reply: every result fits ``max_result_chars`` characters once serialized.

Hosts keep what a tool or read returns only up to a size (Claude Code puts a result over 50,000
characters in a file and shows the model its path; error text over ~10,000 is cut). Sizes here are
always measured on the wire (:func:`wire_chars`: the compact JSON the hub sends, non-ASCII kept),
never as a Python string's length: JSON escaping doubles a text of quotes or newlines, and a JSON
document inside a text is escaped twice.

**One knob, one loop.** What a reply holds is bounded by one *scale* in (0, 1], set for the current
call (a context variable) by the reply layer: providers see their ``max_read_chars`` scaled
(:class:`Limits` wraps the hub's settings), list pages and tools scale their counts with
:func:`scaled`. The reply layer builds the reply at scale 1, measures it, and while it is over
budget builds it again at a scale lowered in proportion (:func:`fit`). Pages and cursors stay what
they were, so a smaller page still names the next one: nothing is lost, it takes more pages. The
all-kernels front passes its scale to the hub it reads from (``META_SCALE`` in ``_meta``), so a
page that grows when its URIs are qualified shrinks at the source.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

RESULT_CHARS = 50_000  # the default budget of one result (Claude Code's persist-to-file threshold)
ERROR_CHARS = 10_000  # an error's budget (Claude Code cuts error text at ~10,000 characters)
MAX_DECLARED = 500_000  # the largest anthropic/maxResultSizeChars Claude Code honours
RESERVE = 1_000  # room for what is added to a result after its handler (the era's fields, an id)
META_SCALE = "mcp-notebook/scale"  # request _meta: the scale a front asks a hub to read at
MIN_SCALE = 1e-4
ATTEMPTS = 8

T = TypeVar("T")
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
_scale: ContextVar[float] = ContextVar("mcp_notebook_scale", default=1.0)


def wire_chars(value: Any) -> int:
    """Characters of ``value`` serialized as the hub sends it (compact JSON, non-ASCII kept)."""
    return len(_ENCODER.encode(value))


def scale() -> float:
    """The scale in effect for the current call (1: nothing was over budget)."""
    return _scale.get()


def scaled(n: int, floor: int = 1) -> int:
    """``n`` items at the current scale (at least ``floor``)."""
    return max(floor, int(n * _scale.get()))


@contextlib.contextmanager
def scaled_to(value: float) -> Iterator[None]:
    """Run the block at ``value`` times the current scale."""
    token = _scale.set(max(MIN_SCALE, min(1.0, _scale.get() * value)))
    try:
        yield
    finally:
        _scale.reset(token)


def scale_param(meta: Any) -> float:
    """The scale a request's ``_meta`` asks for (a front reading from a hub); 1 otherwise."""
    value = meta.get(META_SCALE) if isinstance(meta, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and MIN_SCALE <= value <= 1:
        return float(value)
    return 1.0


class Limits:
    """A hub's settings as its providers see them: ``max_read_chars`` at the current scale.

    Settings that are traits of a ``HasTraits`` base are kept as plain attributes once read and
    dropped when the trait changes (``observe``): the post-cell hook reads several every cell, and a
    trait's descriptor is two Python calls each (docs/DESIGN.md, "The post-cell hook, fourth cut").
    ``settings_version`` counts the changes, for callers that derive something from several settings."""

    def __init__(self, base: Any):
        self._base = base
        self.settings_version = 0
        observe = getattr(base, "observe", None)
        self._traits = callable(observe) and callable(getattr(base, "has_trait", None))
        if self._traits:
            observe(self._changed)

    def __getattr__(self, name: str) -> Any:
        version = self.settings_version
        value = getattr(self._base, name)
        if self._traits and not name.startswith("_") and self._base.has_trait(name):
            self.__dict__[name] = value
            if self.settings_version != version:  # changed while read (another thread): read it again next time
                self.__dict__.pop(name, None)
        return value

    def _changed(self, change: Any) -> None:
        self.settings_version += 1  # before the pop: a reader that stored the old value sees the new version
        self.__dict__.pop(change["name"], None)

    @property
    def max_read_chars(self) -> int:
        base = int(self._base.max_read_chars)
        return base if _scale.get() >= 1.0 else max(200, int(base * _scale.get()))


def fit(build: Callable[[], T], budget: int, measure: Callable[[T], int] = wire_chars) -> tuple[T, int]:
    """``build()`` at the current scale, then at lower scales while ``measure`` says it exceeds
    ``budget``; returns the last value and its size (over budget only if even the smallest scale
    tried was: the caller cuts it)."""
    value = build()
    size = measure(value)
    factor, previous = 1.0, None
    for _ in range(ATTEMPTS):
        if size <= budget or _scale.get() * factor <= MIN_SCALE:
            break
        step = 0.9 * budget / size
        if previous is not None and size > 0.95 * previous:  # no progress (a count clipped by what is left)
            step = min(step, 0.5)
        factor *= max(0.05, min(0.9, step))
        previous = size
        with scaled_to(factor):
            value = build()
        size = measure(value)
    return value, size


def cut_text(text: str, budget: int, note: str) -> str:
    """``text`` cut so that its serialized form fits ``budget`` characters, ``note`` appended."""
    if wire_chars(text) <= budget:
        return text
    keep = max(0, budget - wire_chars(note) - 2)
    lo, hi = 0, min(len(text), keep)
    while lo < hi:  # the longest prefix whose escaped form fits
        mid = (lo + hi + 1) // 2
        if wire_chars(text[:mid]) <= keep:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + note


def declared(budget: int) -> int:
    """The size a tool declares it may need (``_meta["anthropic/maxResultSizeChars"]``)."""
    return max(1, min(MAX_DECLARED, budget))


def bounded_error(err: dict[str, Any], budget: int = ERROR_CHARS) -> dict[str, Any]:
    """A JSON-RPC error object within ``budget``: its message cut, its data kept where small."""
    if wire_chars(err) <= budget:
        return err
    out = dict(err)
    data = out.get("data")
    if data is not None and wire_chars(data) > budget // 5:
        if isinstance(data, dict):
            data = {
                str(k): v if wire_chars(v) <= 500 else cut_text(str(v), 500, " …") for k, v in list(data.items())[:20]
            }
        else:
            data = cut_text(str(data), budget // 5, " …")
        out["data"] = data
    room = budget - wire_chars({**out, "message": ""}) - 2
    out["message"] = cut_text(str(out.get("message", "")), room, " … [cut to fit the error budget]")
    return out


def bounded_tool_error(result: dict[str, Any], budget: int = ERROR_CHARS) -> dict[str, Any]:
    """An ``isError`` tool result within ``budget``: its (first four) text items share the room."""
    if wire_chars(result) <= budget:
        return result
    texts = [c["text"] for c in result.get("content") or [] if c.get("type") == "text"][:4] or [""]
    empty = {"content": [{"type": "text", "text": ""}] * len(texts), "isError": True}
    room = (budget - wire_chars(empty)) // len(texts)
    return {"content": [{"type": "text", "text": cut_text(t, room, " … [cut]")} for t in texts], "isError": True}
