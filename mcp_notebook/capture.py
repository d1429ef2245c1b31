"""Kernel-side capture of executed cells and their outputs.

Runs on the kernel's main thread and costs O(output size) at most: every hook passes the user's
output through first and records afterwards, and never raises. Where outputs are observed:

- streams: the ``write`` of ``sys.stdout`` / ``sys.stderr`` wrapped on the instance from pre_run_cell
  to post_run_cell (ipykernel's OutStream, or any stream that takes instance attributes);
- display_data / update_display_data / clear_output: ipykernel's ``display_pub.register_hook``
  (thread-local: displays from the main thread), else a wrapped ``display_pub.publish``;
- execute_result: ``displayhook.register_hook`` (ipykernel 7), else a wrapped ``write_format_data``;
- errors: a wrapped ``shell._showtraceback`` (structured IPython traceback), else the exception in
  the post_run_cell result (name and message only).

Outputs produced after a cell finished (a background thread printing later) are not recorded;
``update_display_data`` for an earlier display is applied to that earlier cell."""

from __future__ import annotations

import io
import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from threading import get_ident
from typing import Any

from .cell_streams import MAIN, CellStreams, divert, on_hub_thread
from .cell_streams import unpatch as _unpatch

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
BINARY_MIME = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"})


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if "\x1b" in text else text


def binary_size(value: str | bytes) -> int:
    """Decoded size of raw bytes or of a base64 string (without decoding it)."""
    if isinstance(value, bytes):
        return len(value)
    value = value.rstrip()  # early IPython 8 releases end base64 images with a newline after the padding
    n = len(value) - value.count("\n")
    return n * 3 // 4 - (2 if value.endswith("==") else 1 if value.endswith("=") else 0)


class Output:
    """One output of a cell, bounded at capture time: stream (``name``, text in ``buf``: amortized O(1)
    appends), execute_result, display_data or error."""

    __slots__ = (
        "buf", "chars", "data", "description", "display_id", "ename", "evalue", "kept", "metadata", "name",
        "notes", "output_type", "sizes", "traceback", "truncated",
    )  # fmt: skip

    def __init__(
        self, output_type: str, name: str | None = None, buf: io.StringIO | None = None, display_id: str | None = None,
        ename: str | None = None, evalue: str | None = None, traceback: list[str] | None = None, truncated: bool = False,
    ) -> None:  # fmt: skip
        self.output_type, self.name, self.buf, self.display_id = output_type, name, buf, display_id
        self.data: dict[str, str | bytes] = {}  # mime bundle (images: bytes or base64)
        self.sizes: dict[str, int] = {}  # original size per mime type (chars or bytes)
        self.metadata: dict[str, Any] = {}
        self.ename, self.evalue, self.truncated, self.notes = ename, evalue, truncated, []
        self.traceback = [] if traceback is None else traceback
        self.chars = self.kept = 0  # stream characters seen (kept or not), and kept
        # What it shows, for a model (issue #44; a callable: read on read); on the hub's side only.
        self.description: str | Callable[[], str] | None = None

    def text(self) -> str:
        """Stream text, or the error as text (ANSI escapes removed)."""
        if self.output_type == "error":
            head = f"{self.ename}: {self.evalue}"
            body = strip_ansi("\n".join(self.traceback))
            return body if body else head
        return strip_ansi(self.buf.getvalue() if self.buf is not None else "")

    def mime_types(self) -> list[str]:
        if self.output_type in ("stream", "error"):
            return ["text/plain"]
        return list(self.data)


_NO_ID = object()  # IPython's ExecutionInfo without a cell_id (early 8.x)


class CellRecord:
    """One executed cell (``started``: epoch seconds, ``t0``: perf_counter; ``origin``: the header of
    the execute request, when one came)."""

    __slots__ = (
        "cell_id", "dropped", "duration", "execution_count", "finished", "origin", "outputs", "pending_clear",
        "seq", "source", "started", "status", "store_history", "t0", "version",
    )  # fmt: skip

    def __init__(
        self, seq: int, source: str, cell_id: str | None, store_history: bool, started: float, t0: float,
        execution_count: int | None = None, origin: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        self.seq, self.source, self.cell_id, self.store_history = seq, source, cell_id, store_history
        self.started, self.t0, self.execution_count, self.origin = started, t0, execution_count, origin
        self.duration = self.finished = None  # seconds, and epoch seconds: once it ends (float | None)
        self.status, self.pending_clear = "running", False  # status: running | ok | error
        self.outputs: list[Output] = []
        self.dropped = self.version = 0  # outputs over the per-cell cap; bumps on every change once finished


class CellCapture:
    """Records executed cells of one shell into a bounded history."""

    def __init__(self, shell: Any, limits: Any):
        self.shell = shell
        self.limits = limits
        self.lock = threading.Lock()
        self.cells: deque[CellRecord] = deque()
        self.current: CellRecord | None = None
        self._outer: list[CellRecord] = []  # cells paused by a nested run_cell
        self.seq = 0
        self._active = False
        self._undo: list[Callable[[], None]] = []
        self.streams = CellStreams(self._make_write)  # our write on sys.stdout/stderr
        self._quiet = 0  # >0 while a fallback publisher prints what it already recorded
        self._cap = limits.max_output_chars
        self._max_outputs = limits.max_cell_outputs
        self._new = False
        self._changed: set[int] = set()
        self.last: CellRecord | None = None  # the cell that finished last (what the post-cell hook is about)
        self.origins = Origins()  # who sent each execute request
        self.annotate: Callable[[dict[str, Any]], Any] | None = None

    # -- install / uninstall ------------------------------------------------------------
    def install(self, cell_hooks: bool = True) -> None:
        """Register the hooks; main thread. ``uninstall`` removes every one of them. The caller calls
        :meth:`post_run_cell` (before its change detection); with ``cell_hooks=False`` it calls
        :meth:`pre_run_cell` from its own hook too (the hub: one IPython callback each way, issue #48)."""
        shell = self.shell
        self._active = True
        if cell_hooks:
            shell.events.register("pre_run_cell", self.pre_run_cell)
            self._undo.append(lambda: _unregister(shell, "pre_run_cell", self.pre_run_cell))
        pub = getattr(shell, "display_pub", None)
        if pub is not None:
            if hasattr(pub, "register_hook"):
                pub.register_hook(self._display_hook)
                self._undo.append(lambda: pub.unregister_hook(self._display_hook))
            else:
                self._wrap(pub, "publish", self._wrap_publish)
        dh = getattr(shell, "displayhook", None)
        if dh is not None:
            if hasattr(dh, "register_hook"):
                dh.register_hook(self._result_hook)
                self._undo.append(lambda: dh.unregister_hook(self._result_hook))
            else:
                self._wrap(dh, "write_output_prompt", self._wrap_quiet)
                self._wrap(dh, "write_format_data", self._wrap_format_data)
        self._wrap(shell, "_showtraceback", self._wrap_showtraceback)

    def uninstall(self) -> None:
        self._active = False
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception:
                pass
        self.streams.detach()
        self.current = None
        self._outer.clear()

    def _wrap(self, obj: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        try:
            own = vars(obj)
            had, previous = attr in own, own.get(attr)
            wrapper = make(getattr(obj, attr))
            setattr(obj, attr, wrapper)
        except Exception:
            return
        self._undo.append(lambda: _unpatch(obj, attr, wrapper, had, previous))

    # -- cell lifecycle -----------------------------------------------------------------
    def pre_run_cell(self, info: Any = None) -> None:
        if not self._active:
            return
        try:  # one call a cell: the cell's start inlined (issue #48)
            limits = self.limits
            source = getattr(info, "raw_cell", None) or ""
            origin = None if self.current is not None else request_origin(self.shell)  # not for a nested run_cell
            cell_id = getattr(info, "cell_id", _NO_ID)  # one lookup, not hasattr and getattr (issue #48)
            if cell_id is _NO_ID:
                cell_id = self._request_cell_id()
            store = bool(getattr(info, "store_history", True))
            with self.lock:
                self.seq += 1
                # positional: seq, source, cell_id, store_history, started, t0, execution_count, origin
                cell = CellRecord(self.seq, source, cell_id, store, time.time(), time.perf_counter(), None, origin)
                self.cells.append(cell)
                while len(self.cells) > max(1, limits.max_cells):
                    self.cells.popleft()
                self._cap, self._max_outputs = limits.max_output_chars, limits.max_cell_outputs  # once per cell
                if self.current is not None:
                    self._outer.append(self.current)
                self.current = cell
                self._new = True
            on = self.streams.on_this_cell  # a nested cell finds both wrapped already: no call
            if id(sys.stdout) not in on or id(sys.stderr) not in on:
                self.streams.attach()
        except Exception:
            pass

    def _request_cell_id(self) -> str | None:
        """The frontend's cell id from the execute request, where IPython's run_cell takes none (early 8.x)."""
        if self.current is not None:  # a nested run_cell is not the request's cell
            return None
        parent = getattr(self.shell, "parent_header", None)  # ipykernel: the execute_request being run
        metadata = parent.get("metadata") if isinstance(parent, dict) else None
        cell_id = metadata.get("cellId") if isinstance(metadata, dict) else None
        return cell_id if isinstance(cell_id, str) else None

    def post_run_cell(self, result: Any = None) -> None:
        """Finish the running cell; call before the hub's change detection."""
        cell = self.current
        if cell is None or not self._active:
            return
        try:  # the cell's end inlined (issue #48)
            err = None
            if result is not None:
                err = result.error_before_exec if result.error_before_exec is not None else result.error_in_exec
                cell.execution_count = result.execution_count
            with self.lock:
                if err is not None and not any(o.output_type == "error" for o in cell.outputs):
                    self._append(cell, Output("error", ename=type(err).__name__, evalue=str(err)))
                cell.status = "ok" if result is not None and err is None else "error"  # result.success, no call
                cell.duration = time.perf_counter() - cell.t0
                cell.finished = time.time()
                self._changed.add(cell.seq)
                self.last = cell
        except Exception:
            pass
        finally:
            self.current = self._outer.pop() if self._outer else None
            if self.current is None:
                self.streams.release()

    def take_changes(self) -> tuple[bool, set[int]]:
        """(a cell started since the last call, seqs whose resources changed)."""
        with self.lock:
            new, changed = self._new, self._changed
            self._new, self._changed = False, set()
        return new, changed

    # -- reading ------------------------------------------------------------------------
    def snapshot(self) -> list[CellRecord]:
        with self.lock:
            return list(self.cells)

    def get(self, seq: int) -> CellRecord | None:
        with self.lock:
            if not self.cells:
                return None
            i = seq - self.cells[0].seq  # seqs are consecutive within the history
            if 0 <= i < len(self.cells) and self.cells[i].seq == seq:
                return self.cells[i]
        return None

    def seq_for_cell_id(self, cell_id: str) -> int | None:
        """The latest executed cell with this frontend cell id."""
        with self.lock:
            for cell in reversed(self.cells):
                if cell.cell_id == cell_id:
                    return cell.seq
        return None

    # -- recording ----------------------------------------------------------------------
    def _append(self, cell: CellRecord, out: Output) -> None:
        if cell.pending_clear:
            cell.outputs.clear()
            cell.pending_clear = False
        if len(cell.outputs) >= self._max_outputs:
            cell.dropped += 1
            return
        cell.outputs.append(out)

    def _touch(self, cell: CellRecord) -> None:
        if cell.finished is not None:
            cell.version += 1
            self._changed.add(cell.seq)

    def add_stream(self, name: str, text: str) -> None:
        cell = self.current
        if cell is None or self._quiet or not text:
            return
        with self.lock:
            if cell.pending_clear:
                cell.outputs.clear()
                cell.pending_clear = False
            outs = cell.outputs
            last = outs[-1] if outs else None
            if last is None or last.name != name:  # only stream outputs have a name
                if len(outs) >= self._max_outputs:
                    cell.dropped += 1
                    return
                last = Output("stream", name=name, buf=io.StringIO())
                outs.append(last)
            last.chars += len(text)
            room = self._cap - last.kept
            if room <= 0:
                last.truncated = True
                return
            if len(text) > room:
                text = text[:room]
                last.truncated = True
            last.buf.write(text)
            last.kept += len(text)

    def add_bundle(
        self, output_type: str, data: dict[str, Any], metadata: Any = None, display_id: str | None = None
    ) -> None:
        cell = self.current
        if cell is None or not isinstance(data, dict) or not data:
            return
        out = Output(output_type, display_id=display_id)
        out.description = self._describe(data)
        self._fill(out, data, metadata)
        with self.lock:
            self._append(cell, out)

    def _describe(self, data: dict[str, Any]) -> Any:
        """The bundle's description from figures.live.FigureReader.annotate, when installed."""
        try:
            return None if self.annotate is None else self.annotate(data)
        except Exception as exc:  # the output is recorded all the same
            return f"This output could not be described ({type(exc).__name__})."

    def update_display(self, display_id: str | None, data: dict[str, Any], metadata: Any = None) -> None:
        """update_display_data: replace the bundle of every earlier output with that display id."""
        if not display_id or not isinstance(data, dict):
            return
        description = self._describe(data)
        with self.lock:
            for cell in reversed(self.cells):
                hit = False
                for out in cell.outputs:
                    if out.display_id == display_id:
                        out.data, out.sizes, out.notes, out.truncated = {}, {}, [], False
                        out.description = description
                        self._fill(out, data, metadata)
                        hit = True
                if hit:
                    self._touch(cell)

    def clear(self, wait: bool) -> None:
        cell = self.current
        if cell is None:
            return
        with self.lock:
            if wait:
                cell.pending_clear = True
            else:
                cell.outputs.clear()
                cell.pending_clear = False

    def add_error(self, ename: str, evalue: str, stb: Any) -> None:
        cell = self.current
        if cell is None:
            return
        cap = self.limits.max_output_chars
        lines: list[str] = []
        used = 0
        truncated = False
        for line in stb if isinstance(stb, (list, tuple)) else [str(stb)]:
            line = str(line)
            if used + len(line) > cap:
                lines.append(line[: max(0, cap - used)])
                truncated = True
                break
            lines.append(line)
            used += len(line) + 1
        out = Output("error", ename=ename, evalue=evalue[:cap], traceback=lines, truncated=truncated)
        with self.lock:
            self._append(cell, out)

    def _fill(self, out: Output, data: dict[str, Any], metadata: Any) -> None:
        limits = self.limits
        cap = limits.max_output_chars
        for mime, value in data.items():
            if mime in BINARY_MIME and isinstance(value, (bytes, str)):
                size = binary_size(value)
                out.sizes[mime] = size
                if size > limits.max_image_bytes:
                    out.notes.append(f"{mime} of {size} bytes dropped (over MCPHub.max_image_bytes)")
                    continue
                out.data[mime] = value
                continue
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            elif isinstance(value, list) and mime.startswith("text/") and all(isinstance(v, str) for v in value):
                value = "".join(value)
            elif not isinstance(value, str):
                try:
                    value = json.dumps(value, ensure_ascii=False, default=str)
                except (TypeError, ValueError):
                    value = str(value)
            out.sizes[mime] = len(value)
            if len(value) > cap:
                value = value[:cap]
                out.truncated = True
                out.notes.append(f"{mime} cut to {cap} of {out.sizes[mime]} chars at capture")
            out.data[mime] = value
        if isinstance(metadata, dict) and metadata:
            small = {k: v for k, v in metadata.items() if isinstance(v, (str, int, float, bool, dict, list))}
            try:
                if len(json.dumps(small, default=str)) <= 4000:
                    out.metadata = small
            except (TypeError, ValueError):
                pass

    # -- hooks and wrappers -------------------------------------------------------------
    def _make_write(self, original: Callable[[str], Any], name: str) -> Callable[[str], Any]:
        def write(text: str) -> Any:
            if get_ident() != MAIN and on_hub_thread():  # the hub's own threads: never in a cell
                return divert(text)
            n = original(text)
            if self.current is not None and not self._quiet:
                try:
                    self.add_stream(name, text)
                except Exception:
                    pass
            return n

        write.mcp_hub_guard = "capture"  # type: ignore[attr-defined]  # a guard itself (cell_streams.is_guard)
        return write

    def _display_hook(self, msg: Any) -> Any:
        """ipykernel display_pub hook: observe and pass the message on unchanged."""
        if self.current is not None or (isinstance(msg, dict) and msg.get("msg_type") == "update_display_data"):
            try:
                self._on_display_msg(msg)
            except Exception:
                pass
        return msg

    def _on_display_msg(self, msg: dict[str, Any]) -> None:
        kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
        content = msg.get("content") or {}
        transient = content.get("transient") or {}
        display_id = transient.get("display_id") if isinstance(transient, dict) else None
        if kind == "display_data":
            self.add_bundle("display_data", content.get("data") or {}, content.get("metadata"), display_id)
        elif kind == "update_display_data":
            self.update_display(display_id, content.get("data") or {}, content.get("metadata"))
        elif kind == "clear_output":
            self.clear(bool(content.get("wait")))

    def _result_hook(self, msg: Any) -> Any:
        """ipykernel displayhook hook (execute_result): observe, pass on unchanged."""
        if self.current is not None:
            try:
                content = msg.get("content") or {}
                self.add_bundle("execute_result", content.get("data") or {}, content.get("metadata"))
            except Exception:
                pass
        return msg

    def _wrap_publish(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def publish(*args: Any, **kwargs: Any) -> Any:
            self._quiet += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._quiet -= 1
                try:
                    data = kwargs.get("data", args[0] if args else None)
                    metadata = kwargs.get("metadata", args[1] if len(args) > 1 else None)
                    transient = kwargs.get("transient") or {}
                    display_id = transient.get("display_id") if isinstance(transient, dict) else None
                    if kwargs.get("update"):
                        self.update_display(display_id, data or {}, metadata)
                    else:
                        self.add_bundle("display_data", data or {}, metadata, display_id)
                except Exception:
                    pass

        return publish

    def _wrap_quiet(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def quiet(*args: Any, **kwargs: Any) -> Any:
            self._quiet += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._quiet -= 1

        return quiet

    def _wrap_format_data(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def write_format_data(format_dict: Any, md_dict: Any = None) -> Any:
            self._quiet += 1
            try:
                return original(format_dict, md_dict)
            finally:
                self._quiet -= 1
                try:
                    self.add_bundle("execute_result", format_dict or {}, md_dict)
                except Exception:
                    pass

        return write_format_data

    def _wrap_showtraceback(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def _showtraceback(etype: Any, evalue: Any, stb: Any) -> Any:
            self._quiet += 1
            try:
                return original(etype, evalue, stb)
            finally:
                self._quiet -= 1
                try:
                    self.add_error(getattr(etype, "__name__", str(etype)), str(evalue), stb)
                except Exception:
                    pass

        return _showtraceback


def _unregister(shell: Any, event: str, callback: Callable[..., Any]) -> None:
    try:
        shell.events.unregister(event, callback)
    except ValueError:
        pass


def request_origin(shell: Any) -> dict[str, Any] | None:
    """Who sent the execute request being run (its header's session, username, msg_id, date); None
    outside a kernel. Read, never executed: the kernel's own parent message."""
    parent = getattr(shell, "parent_header", None)
    header = parent.get("header") if isinstance(parent, dict) else None
    if not isinstance(header, dict) or header.get("msg_type") != "execute_request":
        return None
    out = {}
    for key in ("session", "username", "msg_id"):
        value = header.get(key)
        if value is not None:
            out[key] = (value if type(value) is str else str(value))[:200]
    date = header.get("date")
    if date is not None:  # jupyter_client's datetime kept as it is: formatted when read (origin_date)
        out["date"] = date if hasattr(date, "isoformat") else str(date)[:200]
    return out


def origin_date(origin: dict[str, Any]) -> dict[str, Any]:
    """``origin`` with its date as text (ISO 8601), as readers show it; the cell hook keeps the object."""
    date = origin.get("date")
    if date is not None and type(date) is not str:
        try:
            origin["date"] = date.isoformat()[:200]
        except Exception:
            origin["date"] = str(date)[:200]
    return origin


class Origins:
    """The frontends known by their client session (the JupyterLab extension's comm says which is its
    own), so a cell's origin can name the frontend that sent it."""

    def __init__(self) -> None:
        self.frontends: dict[str, str] = {}  # client session id -> what it is ("jupyterlab"), newest last

    def note_frontend(self, session: Any, kind: str) -> None:
        """Messages of client ``session`` came from ``kind``. At most 32 sessions, the oldest forgotten."""
        if not isinstance(session, str) or not session:
            return
        self.frontends.pop(session, None)
        self.frontends[session] = kind
        while len(self.frontends) > 32:
            self.frontends.pop(next(iter(self.frontends)))

    def origin_of(self, cell: CellRecord) -> dict[str, str] | None:
        """The cell's origin, with ``frontend`` when its session is a known one."""
        if cell.origin is None:
            return None
        out = origin_date(dict(cell.origin))
        kind = self.frontends.get(out.get("session", ""))
        if kind is not None:
            out["frontend"] = kind
        return out
