"""Cells and outputs of a kernel, recorded from what it publishes on IOPub (any language, any
client): ``execute_input`` opens a cell (its code and execution count), the outputs parented to
the same request fill it, the kernel's ``idle`` for that request closes it. The records are the
in-kernel capture's (capture.py), so the cells provider serves them unchanged.

Sans-IO: :meth:`IopubCapture.feed` takes one deserialized message (the watcher's thread) and says
whether a cell finished. Requests of our own (a variable read) are ignored by their msg_id.
"""

from __future__ import annotations

import time
from typing import Any

from ..capture import CellCapture, CellRecord, Output

OUTPUT_TYPES = frozenset({"stream", "display_data", "execute_result", "error", "update_display_data", "clear_output"})
MAX_OURS = 256  # msg_ids of our own requests remembered (a read in flight is one of the latest)


class IopubCapture(CellCapture):
    """A :class:`~mcp_notebook.capture.CellCapture` fed by IOPub messages instead of IPython hooks."""

    def __init__(self, limits: Any):
        super().__init__(None, limits)
        self._active = True
        self.request: str | None = None  # msg_id of the execute_request whose cell is open
        self.state = "unknown"  # the kernel's execution state, as its IOPub says (ours left out)
        self.busy_since: float | None = None
        self.last_execution: float | None = None
        self.ours: dict[str, None] = {}  # msg_ids of our own requests, newest last
        self.seen_messages = 0
        self.restarts = 0

    def mark_ours(self, msg_id: str) -> None:
        """A request we send (a variable read): its messages are not the user's cells."""
        self.ours[msg_id] = None
        while len(self.ours) > MAX_OURS:
            del self.ours[next(iter(self.ours))]

    def feed(self, msg: dict[str, Any]) -> bool:
        """One IOPub message; True when a cell finished with it (the caller runs the change detection)."""
        kind = (msg.get("header") or {}).get("msg_type")
        parent = (msg.get("parent_header") or {}).get("msg_id")
        content = msg.get("content") or {}
        self.seen_messages += 1
        if parent in self.ours or not isinstance(content, dict):
            return False
        if kind == "status":
            return self._status(content.get("execution_state"), parent)
        if kind == "execute_input":
            finished = self._close(None) if self.current is not None else False
            self._open(str(content.get("code") or ""), content.get("execution_count"), parent, msg)
            return finished
        if kind == "update_display_data":
            self.update_display(_display_id(content), content.get("data") or {}, content.get("metadata"))
            return False
        if kind in OUTPUT_TYPES and self.current is not None and parent == self.request:
            self._output(kind, content)
        return False

    def _status(self, state: Any, parent: str | None) -> bool:
        if state == "busy":
            self.state = "busy"
            self.busy_since = self.busy_since or time.time()
        elif state == "idle":
            self.state = "idle"
            self.busy_since = None
            if self.current is not None and parent == self.request:
                return self._close(None)
        elif state in ("starting", "restarting", "dead"):
            self.state = state
        return False

    def _open(self, code: str, count: Any, parent: str | None, msg: dict[str, Any]) -> None:
        header = msg.get("parent_header") or {}
        origin = {k: str(header[k]) for k in ("session", "username") if isinstance(header.get(k), str)}
        with self.lock:
            self.seq += 1
            cell = CellRecord(
                seq=self.seq,
                source=code,
                cell_id=None,  # a frontend's cell id travels in the request's metadata, not on IOPub
                store_history=True,
                started=time.time(),
                t0=time.perf_counter(),
                execution_count=count if isinstance(count, int) else None,
                origin=origin or None,
            )
            self.cells.append(cell)
            while len(self.cells) > max(1, self.limits.max_cells):
                self.cells.popleft()
            self._cap, self._max_outputs = self.limits.max_output_chars, self.limits.max_cell_outputs
            self.current = cell
            self.request = parent
            self._new = True

    def _output(self, kind: str, content: dict[str, Any]) -> None:
        if kind == "stream":
            self.add_stream(str(content.get("name") or "stdout"), str(content.get("text") or ""))
        elif kind in ("display_data", "execute_result"):
            self.add_bundle(kind, content.get("data") or {}, content.get("metadata"), _display_id(content))
        elif kind == "error":
            self.add_error(
                str(content.get("ename") or "Error"), str(content.get("evalue") or ""), content.get("traceback") or []
            )
        elif kind == "clear_output":
            self.clear(bool(content.get("wait")))

    def _close(self, note: str | None) -> bool:
        """End the open cell (its idle came, or another began, or the kernel restarted or died)."""
        cell = self.current
        if cell is None:
            return False
        with self.lock:
            if note is not None:
                self._append(cell, Output("error", ename="KernelRestarted", evalue=note))
            failed = any(o.output_type == "error" for o in cell.outputs)
            cell.status = "error" if failed else "ok"
            cell.duration = time.perf_counter() - cell.t0
            cell.finished = time.time()
            self._changed.add(cell.seq)
            self.last = cell
            self.current = None
            self.request = None
        self.last_execution = cell.finished
        return True

    def restarted(self, how: str) -> bool:
        """The kernel restarted (``how``: restarted, died): a cell it was running ends with a note."""
        self.restarts += 1
        self.state = "unknown" if how == "restarted" else "dead"  # (its next status says; the server's count too)
        return self._close(f"the kernel {how} while this cell ran")


def _display_id(content: dict[str, Any]) -> str | None:
    transient = content.get("transient")
    found = transient.get("display_id") if isinstance(transient, dict) else None
    return found if isinstance(found, str) else None
