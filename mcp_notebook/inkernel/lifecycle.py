"""The hub running in this process: start it, stop it, and tell whoever asked to know.

``%load_ext``, ``%mcp start|stop``, the JupyterLab panel's buttons and the widgets all go
through here. Who needs to follow a hub (the JupyterLab comm) registers with :func:`follow`
instead of being imported by the hub, so the hub knows nothing of its views.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .kernel_hub import KernelHub

Follower = tuple[Callable[["KernelHub"], None], Callable[["KernelHub"], None]]

_current: KernelHub | None = None
_followers: list[Follower] = []


def current() -> KernelHub | None:
    """The hub started in this process and not stopped since, if any."""
    return _current


def start(shell: Any, hold: bool = False) -> KernelHub:
    """Start a hub in ``shell`` (a no-op with a message when one serves already); with ``hold``,
    its server thread waits for ``release()`` (``KernelHub.start``)."""
    global _current
    if _current is not None and _current.running:
        print(f"mcp-notebook is already serving at {_current.url}")
        return _current
    from .kernel_hub import KernelHub  # the protocol, transport and providers load with the first hub

    kernel_hub = KernelHub(shell)
    kernel_hub.start(hold=hold)
    _current = kernel_hub
    for started, _ in list(_followers):
        started(kernel_hub)
    where = f"mcp-notebook: MCP server at {kernel_hub.url}"
    if kernel_hub.config.require_token:
        print(f"{where} (token in {kernel_hub.runtime_file}; mcp_notebook.connection_info() has it)")
    else:
        print(f"{where} (no token required)")
    return kernel_hub


def stop() -> None:
    """Stop the running hub, if any."""
    global _current
    kernel_hub, _current = _current, None
    if kernel_hub is None:
        return
    for _, stopping in list(_followers):
        stopping(kernel_hub)
    kernel_hub.stop()


def follow(started: Callable[[KernelHub], None], stopping: Callable[[KernelHub], None]) -> None:
    """Call ``started`` after each hub starts and ``stopping`` before it stops."""
    _followers.append((started, stopping))


def unfollow(started: Callable[[KernelHub], None]) -> None:
    _followers[:] = [f for f in _followers if f[0] != started]
