"""One kernel served from the server's side: the in-kernel hub's providers over what the server
sees (cells and outputs from IOPub, the notebook on disk, variables where the language allows), an
``McpServer`` of its own, and a carrier the all-kernels front and the per-kernel route drive
in-process (the bridge's stdio carrier: no port, no token)."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from ..bridge.stdio_carrier import StdioCarrier
from ..figures.bundle import describe_charts
from ..hubclient.address import HubAddress
from ..inkernel.config import MCPHub
from ..nb_tools import add_nb_tools
from ..protocol.exchange import ServerSettings
from ..protocol.server import McpServer
from ..providers.cells import CellsProvider, cell_uri
from ..providers.kernel_info import KernelProvider
from ..providers.notebook import NotebookProvider
from ..resources import Resources
from ..runtime import HubRecord
from ..version import __version__
from .iopub_capture import IopubCapture
from .shell import ShellAsker
from .snippets import SNIPPET_MIME
from .variables import ServedVariables, why_not


class ServedKernel:
    """What a hub-less kernel is to MCP (see the module docstring)."""

    def __init__(
        self,
        kernel_id: str,
        spec: dict[str, Any],
        notebook: Callable[[], str | None],
        asker: ShellAsker | None,
        opted_in: Callable[[], bool],
        seconds: Callable[[], float],
    ):
        self.kernel_id = kernel_id
        self.language = str(spec.get("language") or "")
        self.display_name = str(spec.get("display_name") or spec.get("name") or "")
        self.kernel_name = str(spec.get("name") or "")
        self.notebook_path = notebook
        self.watched_since = time.time()
        self.hub_loaded = False  # set by the watch: a hub of its own serves it (its messages are not recorded)
        limits = MCPHub()
        self.capture = IopubCapture(limits)
        self.capture.annotate = lambda data: (  # chart JSON described before capture cuts it (issue #44)
            describe_charts(data, limits.figure_description_chars) if limits.figure_descriptions else None
        )
        if asker is not None:
            asker.mark_ours = self.capture.mark_ours
        self.asker = asker
        implementation = _implementation(self.kernel_name, spec.get("argv") or [])
        reason = why_not(self.language, implementation)
        self.variables = ServedVariables(self.language, asker if reason is None else None, opted_in, seconds, reason)
        self.notebook = notebook_provider = NotebookProvider(notebook, limits, executed=self.capture.seq_for_cell_id)
        self.resources = Resources(
            [
                KernelProvider(self.summary),
                CellsProvider(self.capture, limits),
                notebook_provider,
                self.variables,
            ]
        )
        notebook_provider.watched = self.resources.watched
        notebook_provider.changed = self.resources.changed
        capture = self.capture
        self.resources.cell_of = lambda: capture.last.seq if capture.last is not None else None
        self.resources.cell_uri = cell_uri
        self.server = McpServer(self.resources, self._settings())
        add_nb_tools(self.server.tools)
        self._carrier: StdioCarrier | None = None
        self._address: HubAddress | None = None
        self._lock = threading.Lock()

    def _settings(self) -> ServerSettings:
        return ServerSettings(
            version=__version__,
            title=f"{self.display_name or self.language} kernel (mcp-notebook, served by the Jupyter server)",
            instructions=(
                "This kernel has no in-kernel hub: the Jupyter server serves its cells and outputs (from "
                "IOPub, since the server started watching), its notebook, and its variables where its "
                "language allows (nb://kernel says what)."
            ),
            token=secrets.token_urlsafe(16),
        )

    # -- what the watcher hands in (the server's loop) --------------------------------------------
    def on_message(self, msg: dict[str, Any]) -> None:
        """One IOPub message of the kernel: a snippet's result, or the user's cells and outputs."""
        parent = (msg.get("parent_header") or {}).get("msg_id")
        if self.asker is not None and parent in self.capture.ours:
            content = msg.get("content") or {}
            data = content.get("data") if isinstance(content, dict) else None
            if isinstance(data, dict) and SNIPPET_MIME in data:
                self.asker.deliver(parent, data[SNIPPET_MIME])
            return
        if self.hub_loaded and (msg.get("header") or {}).get("msg_type") != "status":
            return  # its hub serves it: only its state is followed here (no second copy of its outputs)
        if self.capture.feed(msg):
            self.resources.after_cell()

    def restarted(self, how: str) -> None:
        """The kernel restarted or died (its restarter said so)."""
        if self.capture.restarted(how):
            self.resources.after_cell()
        else:
            self.resources.changed(["nb://kernel"])

    @property
    def state(self) -> str | None:
        """The kernel's execution state as its IOPub says (None until it said one)."""
        cap = self.capture
        return "busy" if cap.current is not None else (None if cap.state == "unknown" else cap.state)

    def summary(self) -> dict[str, Any]:
        cap = self.capture
        return {
            "language": self.language,
            "display_name": self.display_name,
            "kernel_name": self.kernel_name,
            "kernel_id": self.kernel_id,
            "served_by": "jupyter-server",
            "mcp_notebook": __version__,
            "notebook_path": self.notebook_path(),
            "state": cap.state if cap.current is None else "busy",
            "last_execution": cap.last_execution,
            "cells_executed": self.resources.cells_seen,
            "restarts": cap.restarts,
            "watched_since": self.watched_since,
            "history": "cells run since the server started watching this kernel (earlier ones: only in the notebook)",
            "variables": self.variables.reason
            or "nb://vars/{name}: inspect_request; nb://vars and nb://frames/{name}: the opted-in R snippet",
        }

    # -- how it is reached -------------------------------------------------------------------------
    def address(self) -> HubAddress:
        """The front's way to this kernel's server: in-process, through the stdio carrier."""
        with self._lock:
            if self._address is None:
                info = {"kernel_id": self.kernel_id, "url": f"server://{self.kernel_id}/mcp", "served": "server"}
                self._carrier = StdioCarrier(self.server, HubRecord(None, info, True))  # type: ignore[arg-type]
                self._address = self._carrier.address()
            return self._address

    def close(self) -> None:
        with self._lock:
            carrier, self._carrier, self._address = self._carrier, None, None
        if carrier is not None:
            carrier.close()
        self.server.close()
        self.resources.close()


def spec_of(kernel_manager: Any, kernel: Any) -> dict[str, Any]:
    """A kernel's language and display name from its kernelspec (what the server knows)."""
    name = getattr(kernel, "kernel_name", "") or ""
    try:
        spec = kernel_manager.kernel_spec_manager.get_kernel_spec(name)
        return {"name": name, "language": spec.language, "display_name": spec.display_name, "argv": list(spec.argv)}
    except Exception:
        return {"name": name, "language": "", "display_name": name}


async def remote_spec_of(kernel_manager: Any, kernel: Any) -> dict[str, Any]:
    """:func:`spec_of` for a kernel behind a gateway (its kernelspec is asked of the gateway: a model
    ``{"name", "spec": {...}}``)."""
    known = getattr(kernel, "kernel", None)  # the gateway's model of the kernel: its kernelspec's name
    name = str(known.get("name") or "") if isinstance(known, dict) else getattr(kernel, "kernel_name", "") or ""
    try:
        model = await kernel_manager.kernel_spec_manager.get_kernel_spec(name)
        spec = model.get("spec") or {}
        argv = [str(a) for a in spec.get("argv") or []]
        return {"name": name, "language": spec.get("language"), "display_name": spec.get("display_name"), "argv": argv}
    except Exception:
        return {"name": name, "language": "", "display_name": name}


def _implementation(name: str, argv: list[str]) -> str | None:
    """Which kernel implements the language, when it matters for variables (xeus-python, ipykernel)."""
    words = [name, *(str(a) for a in argv[:4])]
    if any("xpython" in w or "xeus" in w for w in words):
        return "xeus-python"
    if any("ipykernel" in w for w in words):
        return "ipykernel"
    return None
