"""mcp-notebook: a live Jupyter/IPython kernel as a Model Context Protocol resource server.

``%load_ext mcp_notebook`` starts the hub. Public API: :func:`resource`, :func:`connection_info`,
:func:`hub`, :func:`notify`.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from .version import __version__

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Loading makes ~10,000 objects that live as long as the kernel (modules, classes, functions,
    providers): the cyclic collector would scan them four or five times while they are made (~5 ms
    of a load). Paused instead, and what was made is then handed to the oldest generation unscanned
    (``gc.freeze`` then ``gc.unfreeze``), where full collections meet it like any other long-lived
    object. Not when the collector was off already, nor when someone froze objects of their own
    (``unfreeze`` would thaw theirs too). Paused first thing: a collection the kernel has pending
    (a fresh kernel's first cell often has a middle-generation one due, 2-6 ms) is not run inside
    ``%load_ext`` either. docs/DESIGN.md, "Loading, sixth cut"."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext mcp_notebook``: register ``%mcp``, start the hub and print one line (never the token)."""
    try:
        with _collector_paused():  # what loading makes lives on: not scanned while it is made
            from .inkernel import lifecycle
            from .inkernel.lab_target import LAB_TARGET
            from .inkernel.magics import register_magics

            register_magics(ipython, {"panel": panel, "browse": browser})
            LAB_TARGET.register(ipython, _lab_comm)  # the JupyterLab extension's comm target; unused without it
            lifecycle.start(ipython, hold=True)
    finally:
        _release_server_thread()


def _release_server_thread() -> None:
    """The hub's server thread was started held (``lifecycle.start(hold=True)``): it imports uvloop
    and makes its loop from now on, so loading's last steps never waited for the GIL behind that
    import (docs/DESIGN.md, "Loading, seventh cut"). Also when loading failed after the start."""
    lifecycle = sys.modules.get("mcp_notebook.inkernel.lifecycle")
    kernel_hub = lifecycle.current() if lifecycle is not None else None
    if kernel_hub is not None:
        kernel_hub.release()


def _lab_comm(shell: Any, comm: Any, msg: dict[str, Any]) -> Callable[[], None]:
    """The JupyterLab comm channel, imported when its first comm opens (inkernel/lab_target.py)."""
    from .inkernel.lab_comm import take_over

    return take_over(shell, comm, msg)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext mcp_notebook``: stop everything the extension started, ``%mcp`` included."""
    from .inkernel import lifecycle
    from .inkernel.kernel_hub import unregister_configurable
    from .inkernel.lab_target import LAB_TARGET
    from .inkernel.magics import unregister_magics

    unregister_magics(ipython)
    lifecycle.stop()
    unregister_configurable(ipython)
    LAB_TARGET.unregister()


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension is (for ``jupyter labextension develop``)."""
    return [{"src": "labextension", "dest": "mcp-notebook"}]


def hub() -> Any:
    """The running :class:`~mcp_notebook.inkernel.kernel_hub.KernelHub` (raises if the extension is not loaded)."""
    from .inkernel import lifecycle

    kernel_hub = lifecycle.current()
    if kernel_hub is None:
        raise RuntimeError("mcp-notebook is not loaded: run %load_ext mcp_notebook first")
    return kernel_hub


def connection_info() -> dict[str, Any]:
    """url, token, pid, kernel_id, notebook_path, protocol_versions of the running hub."""
    return hub().connection_info()


def notify(*uris: str, list_changed: bool = False) -> None:
    """Tell subscribers that resources changed (for custom resources changed outside cells)."""
    from .inkernel import lifecycle

    kernel_hub = lifecycle.current()
    if kernel_hub is not None:
        kernel_hub.resources.changed(uris, list_changed=list_changed)


def resource(
    uri: str,
    name: str | None = None,
    mime_type: str | None = None,
    description: str | None = None,
    *,
    title: str | None = None,
    annotations: dict[str, Any] | None = None,
    icons: Iterable[dict[str, Any]] = (),
    meta: dict[str, Any] | None = None,
    complete: dict[str, Any] | None = None,
    timeout: float = 10.0,
) -> Callable[[F], F]:
    """Register a function as a resource (a plain URI) or a resource template (RFC 6570).

    Template variables are passed as keyword arguments. Return ``str`` for text, ``bytes`` for
    a binary blob, a dict/list for JSON. ``complete`` maps a template variable to a list of
    values or a ``callable(prefix) -> values`` for completion/complete.
    """
    from .providers.custom import CUSTOM, make_registration

    def decorate(fn: F) -> F:
        CUSTOM.register(
            make_registration(
                uri,
                fn,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                annotations=annotations,
                icons=icons,
                meta=meta,
                complete=complete,
                timeout=timeout,
            )
        )
        return fn

    return decorate


def panel() -> Any:
    """An ipywidgets panel of the hub: endpoint, clients, subscriptions, notifications, start/stop."""
    from .widgets import panel as _panel

    return _panel()


def browser(kind: str = "all", text: str = "") -> Any:
    """An ipywidgets resource browser: filter, preview as a client sees it, subscribe to watch changes."""
    from .widgets import browser as _browser

    return _browser(kind, text)


def watch(uri: str) -> Any:
    """An ipywidgets view of one resource that re-renders when a cell changes it (close() to stop)."""
    from .widgets import watch as _watch

    return _watch(uri)


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """The Jupyter server extension (``mcp_notebook.serverext``, an ExtensionApp), imported only by a Jupyter server."""
    from .serverext.extension import MCPNotebookExtension

    return [{"module": "mcp_notebook.serverext", "app": MCPNotebookExtension}]


def remove_resource(uri: str) -> bool:
    """Unregister a resource registered with :func:`resource`."""
    from .providers.custom import CUSTOM

    return CUSTOM.unregister(uri)


__all__ = [
    "__version__",
    "browser",
    "connection_info",
    "hub",
    "load_ipython_extension",
    "notify",
    "panel",
    "remove_resource",
    "resource",
    "unload_ipython_extension",
    "watch",
]
