"""The in-kernel side: figures described from the live objects when they are shown.

A wrapper on the shell's ``display_formatter.format`` sees every object IPython formats (the
inline backend's ``display(fig)`` before it closes the figure, an ipympl canvas of
``%matplotlib widget``, an ipywidget). For a matplotlib figure (any subclass) or a widget it
writes the description into a per-thread slot; the cell capture takes it with the next bundle it
records (``annotate``), so the description stays on the hub's side and the published output is
unchanged. Anything else costs one type check; nothing is imported until a figure is shown.
Chart JSON (Plotly, Vega-Lite) is described when captured, before a long one is cut.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

WIDGET_KEYS = ("description", "value", "min", "max", "step", "options", "index", "label", "placeholder")


class FigureReader:
    """Installed on one shell; ``annotate`` is what the cell capture calls per recorded bundle."""

    def __init__(self, shell: Any, config: Any):
        self.shell = shell
        self.config = config  # figure_descriptions (on/off) and figure_description_chars, read each time
        self._slot = threading.local()
        self._undo: Callable[[], None] | None = None

    def install(self) -> None:
        formatter = getattr(self.shell, "display_formatter", None)
        if formatter is None or not hasattr(formatter, "format"):
            return
        original = formatter.format
        had = "format" in vars(formatter)

        def format(obj: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(obj, *args, **kwargs)
            if type(obj).__module__ not in _PLAIN_MODULES and self.config.figure_descriptions:
                try:
                    self._seen(obj)
                except Exception:
                    pass
            return result

        formatter.format = format

        def undo() -> None:
            if vars(formatter).get("format") is format:
                if had:
                    formatter.format = original
                else:
                    del formatter.format

        self._undo = undo

    def uninstall(self) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None

    def _seen(self, obj: Any) -> None:
        if "matplotlib.figure" in sys.modules and _is_figure(obj):
            self._slot.pending = describe_live_figure(obj, self.chars())
        elif "ipywidgets" in sys.modules and hasattr(obj, "get_state") and hasattr(obj, "model_id"):
            self._slot.pending = _LiveWidget(obj, self.chars)

    def chars(self) -> int:
        return int(self.config.figure_description_chars)

    def annotate(self, data: dict[str, Any]) -> str | Callable[[], str] | None:
        """The description of the bundle being recorded: the live object's, else the chart JSON's."""
        pending = getattr(self._slot, "pending", None)
        self._slot.pending = None
        if not self.config.figure_descriptions:
            return None
        from .bundle import WIDGET, describe_charts  # with the first output: not paid by %load_ext

        if pending is not None and (WIDGET in data or any(m.startswith("image/") for m in data)):
            return pending
        return describe_charts(data, self.chars())


class _LiveWidget:
    """A widget's description, read when the output is read: a widget (an ipympl figure too) lives
    on and changes after it was shown. Holds the widget weakly."""

    def __init__(self, widget: Any, chars: Callable[[], int]):
        import weakref

        self._ref = weakref.ref(widget)
        self._chars = chars
        self._name = type(widget).__name__

    def __call__(self) -> str:
        widget = self._ref()
        if widget is None:
            return f"A {self._name} widget that no longer exists in the kernel."
        try:
            return describe_widget(widget, self._chars())
        except Exception as exc:
            return f"A {self._name} widget whose state could not be read ({type(exc).__name__}: {str(exc)[:120]})."


_PLAIN_MODULES = frozenset({"builtins", "pandas.core.frame", "pandas.core.series", "numpy"})


def _is_figure(obj: Any) -> bool:
    return any(c.__name__ == "Figure" and c.__module__ == "matplotlib.figure" for c in type(obj).__mro__)


def describe_live_figure(fig: Any, limit: int) -> str:
    """A matplotlib figure described, or what could not be read of it."""
    try:
        from .mpl import describe_figure

        text = describe_figure(fig, limit)
    except Exception as exc:
        return (
            f"A matplotlib {type(fig).__name__} that could not be described ({type(exc).__name__}: {str(exc)[:160]})."
        )
    known = type(fig).__module__ == "matplotlib.figure"
    if not known:
        text = (
            f"(a subclass of matplotlib's Figure, {type(fig).__module__}.{type(fig).__qualname__}, read as a Figure)\n"
            + text
        )
    return text


def describe_widget(widget: Any, limit: int) -> str:
    """A widget by its state; an ipympl canvas by its figure."""
    figure = getattr(widget, "figure", None)
    if figure is not None and _is_figure(figure):
        return "Interactive matplotlib figure (%matplotlib widget):\n" + describe_live_figure(figure, limit - 60)
    parts = []
    for key in WIDGET_KEYS:
        if widget.has_trait(key):
            value = getattr(widget, key)
            if key == "options":
                value = list(value)[:12]
            parts.append(f"{key}={value!r}"[:100])
    name = type(widget).__name__
    return f"A {name} widget (model {getattr(widget, 'model_id', '?')}): " + (", ".join(parts) or "no simple state")


__all__ = ["FigureReader", "describe_live_figure", "describe_widget"]
