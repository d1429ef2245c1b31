"""The JupyterLab extension's comm target as ``%load_ext`` registers it: lab_comm.py (the links,
the live document, the state pushes) is imported when the first comm opens, not at load; a kernel
no JupyterLab extension talks to never imports it (docs/DESIGN.md, "Loading, sixth cut"). The
package wires the two (this module is below lab_comm.py, which takes its target and manager)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

TARGET = "mcp_notebook.document"


def comm_manager(shell: Any) -> Any:
    """The kernel's comm manager, or None outside a kernel."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    manager = getattr(kernel, "comm_manager", None)
    if manager is not None:
        return manager
    try:
        import comm

        return comm.get_comm_manager()
    except Exception:
        return None


TakeOver = Callable[[Any, Any, dict], Callable[[], None]]  # (shell, comm, msg) -> how to let go


class LabTarget:
    """Registers the target; the first comm goes to ``take_over`` (the package wires lab_comm.py's),
    which registers the real target in this one's place and returns how to unregister it."""

    def __init__(self) -> None:
        self._shell: Any = None
        self._manager: Any = None
        self._take_over: TakeOver | None = None
        self._release: Callable[[], None] | None = None  # the real channel's unregister, once it took over

    def register(self, shell: Any, take_over: TakeOver) -> bool:
        """Register the comm target in ``shell``'s kernel; False outside a kernel (plain IPython)."""
        manager = comm_manager(shell)
        if manager is None:
            return False
        self._shell, self._manager, self._take_over = shell, manager, take_over
        manager.register_target(TARGET, self._first_open)
        return True

    def unregister(self) -> None:
        """Remove the target (the real channel's, if a comm opened: it closes its links too)."""
        manager, self._manager = self._manager, None
        release, self._release = self._release, None
        if release is not None:
            release()
        elif manager is not None:
            with contextlib.suppress(Exception):
                manager.unregister_target(TARGET, self._first_open)

    def _first_open(self, comm: Any, msg: dict[str, Any]) -> None:
        take_over = self._take_over
        if take_over is not None and self._manager is not None:
            self._release = take_over(self._shell, comm, msg)


LAB_TARGET = LabTarget()
