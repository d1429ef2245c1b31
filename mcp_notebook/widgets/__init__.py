"""Widgets that show the hub live: :func:`panel`, :func:`browser`, :func:`watch`.

ipywidgets is optional: it is imported when a view is built, not when this package is.
"""

from __future__ import annotations

from typing import Any

from ..inkernel import lifecycle

__all__ = ["browser", "panel", "watch"]


def _views() -> Any:
    try:
        from . import panels as views
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("mcp_notebook's views need ipywidgets: pip install 'ipywidgets>=8'") from exc
    return views


def _shell() -> Any:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("mcp_notebook views run inside IPython or a Jupyter kernel")
    return shell


def panel() -> Any:
    """The hub panel: endpoint, revisions, clients, subscriptions, recent notifications, start/stop."""
    current = lifecycle.current()
    return _views().PanelView(current.shell if current is not None else _shell())


def browser(kind: str = "all", text: str = "") -> Any:
    """A resource browser: filter by kind or text, preview, subscribe to watch one change."""
    return _views().BrowserView(_running(), kind=kind, text=text)


def watch(uri: str) -> Any:
    """A view of one resource that re-renders whenever a cell changes it; ``close()`` stops watching."""
    return _views().WatchView(_running(), uri)


def _running() -> Any:
    kernel_hub = lifecycle.current()
    if kernel_hub is None:
        raise RuntimeError("mcp-notebook is not loaded: run %load_ext mcp_notebook first")
    return kernel_hub
