"""Which hub a bridge talks to: one picked by notebook, kernel or recency (``Selector``), or the
front for every kernel this process runs (``FrontSelector``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runtime import AmbiguousHub, HubRecord, discover, runtime_dir, select

POLL_SECONDS = 0.25


class NoHub(Exception):
    """No live hub matches the selection (within the time we were allowed to wait)."""


@dataclass
class Selector:
    notebook: str | None = None
    kernel: str | None = None

    def describe(self) -> str:
        if self.notebook:
            return f"notebook {self.notebook!r}"
        if self.kernel:
            return f"kernel {self.kernel!r}"
        return "any notebook (the newest hub)"

    def find(
        self, prefer: HubRecord | None = None, wait: float = 0.0, stop: threading.Event | None = None
    ) -> HubRecord:
        deadline = time.monotonic() + wait
        pref = (prefer.kernel_id, prefer.notebook_path) if prefer is not None else None
        while True:
            try:
                found = select(discover(), self.notebook, self.kernel, pref)
            except AmbiguousHub as exc:  # waiting would not help: the user must say which
                raise NoHub(str(exc)) from None
            if found is not None:
                return found
            if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                raise NoHub(self.no_hub_message())
            time.sleep(POLL_SECONDS)

    def no_hub_message(self) -> str:
        return (
            f"No running mcp-notebook hub for {self.describe()}. Run `%load_ext mcp_notebook` in the notebook's "
            f"kernel (or `%mcp start` if you stopped it); `mcp-notebook list` shows the running hubs "
            f"(runtime dir {runtime_dir()})."
        )


class FrontRecord(HubRecord):
    """The all-kernels front a bridge serves (a front, not a kernel): what it serves, and how many
    kernels it finds when asked (None: not known here, e.g. a Jupyter server's)."""

    __slots__ = ("count", "serves")

    def __init__(
        self,
        path: Path,
        info: dict[str, Any],
        alive: bool,
        serves: str = "every kernel on this machine",
        count: Callable[[], int | None] = lambda: None,
    ) -> None:
        super().__init__(path, info, alive)
        self.serves = serves
        self.count = count

    def describe(self) -> str:
        try:
            n = self.count()
        except Exception:
            n = None
        found = "" if n is None else f"; {n} kernel{'' if n == 1 else 's'} with a hub found now"
        where = f"at {self.url}" if self.url else "in this process"
        return f"{self.serves} (the all-kernels front {where}{found}; nb://kernels lists them)"


class FrontSelector(Selector):
    """Every kernel on this machine, through the front this process runs (no selector given)."""

    def __init__(self, record: HubRecord):
        super().__init__()
        self.record = record

    def describe(self) -> str:
        return "every kernel on this machine"

    def find(
        self, prefer: HubRecord | None = None, wait: float = 0.0, stop: threading.Event | None = None
    ) -> HubRecord:
        return self.record
