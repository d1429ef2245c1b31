"""MCP over the kernel's own control channel: the carrier for a kernel whose loopback port is out
of reach (behind a kernel gateway, in a container, on another host).

The kernel's control channel reaches every kernel wherever it runs: Jupyter Server and the gateways
proxy it, and only a peer holding the kernel's key (the one that may already execute code) can
send on it. ipykernel serves control on its own thread (``kernel.control_thread``), so a cell
running on the main thread never blocks it, and replies go to the sender only.

Wire format (docs/DESIGN.md, "Kernels anywhere"), every message a signed Jupyter message:

- ``mcp_info_request`` -> ``mcp_info_reply``: the hub's token, URL and revisions (what a runtime
  file holds), or ``{"status": "error", "reason", "message"}``.
- ``mcp_request`` ``{method, headers, body}``: one HTTP exchange; the hub's token in
  ``headers["authorization"]`` as over TCP. Answered by one or more ``mcp_reply`` messages, in
  order: the first has ``status`` and ``headers``; each carries a ``body`` piece; the last has
  ``final: true``. A streamed reply (SSE) sends each batch of events as it comes.
- ``mcp_cancel`` ``{request}``: end that request's stream. ``mcp_keepalive``: the sender is alive
  (streams of a sender silent for a minute are ended).

Our messages are taken off the control stream before ipykernel sees them: a kernel handler would
publish busy/idle on IOPub for each one (every frontend would see the kernel blink busy while an
assistant reads) and would queue them behind ipykernel's control lock. Everything else
(``interrupt_request``, ``shutdown_request``, debugger messages) goes to ipykernel untouched, and
nothing of ours runs on the control thread beyond a look at the header and the hand-off to the
hub's loop: MCP traffic never delays an interrupt.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from ..logs import log
from ..protocol.exchange import HttpReply, HttpRequest, carrier_error, lone_surrogate_path, status_reply
from ..protocol.streams import Stream
from .control_wire import CANCEL, INFO, INFO_REPLY, REPLY, REQUEST, SENDER_IDLE_SECONDS, TO_HUB
from .driver import Exchange, ExchangeDriver, Port

OURS = TO_HUB
METHODS = frozenset({"GET", "POST", "DELETE"})
MAX_IN_FLIGHT = 32  # per sender: requests being answered (streams included)
MAX_STREAMS = 16  # per sender: open event streams
MAX_SENDERS = 64  # senders (header.session) with requests open at once: ids a peer may vary at will
MAX_HEADERS = 64
MAX_HEADER_CHARS = 8192
PIECE_CHARS = 512 * 1024  # a long body goes out in pieces this big (websocket message limits)
SWEEP_SECONDS = 15.0
DELIM = b"<IDS|MSG>"


class _ControlPort(Port):
    """One request's way back to its sender: ``mcp_reply`` messages in order, each numbered; the
    final one releases the request's in-flight slot (the driver makes exactly one final call)."""

    keepalive = None  # the sender's keepalives say who is alive; a quiet stream needs no comment

    def __init__(self, carrier: ControlCarrier, sender: _Sender, msg_id: str, idents: list[Any], parent: dict):
        self.carrier = carrier
        self.sender = sender
        self.msg_id = msg_id
        self.idents = idents
        self.parent = parent
        self.seq = 0
        self.streaming = False  # a stream is open (counted against MAX_STREAMS)
        self.exchange: Exchange | None = None  # set by the driver while the exchange goes on

    def send_reply(self, reply: HttpReply) -> None:
        """A whole reply: status, headers and body in one message (in pieces when long)."""
        self._release()
        self._emit_body(reply.body or b"", True, (reply.status, dict(reply.headers)))

    def open_stream(self, status: int, headers: dict[str, str], events: bytes, end: bool) -> None:
        """The stream's head rides on the message of its first events (or goes alone, now)."""
        self.streaming = not end
        if end:
            self._release()
        self._emit_body(events, end, (status, {**headers, "Content-Type": "text/event-stream"}))

    def send_events(self, events: bytes, end: bool) -> None:
        if end:
            self.streaming = False
            self._release()
        if events or end:
            self._emit_body(events, end)

    def refuse_stream(self, stream: Stream) -> HttpReply | None:
        if stream.kind != "response" and self.sender.streams >= MAX_STREAMS:
            return status_reply(429, f"more than {MAX_STREAMS} open streams", {"Retry-After": "5"})
        return None

    def _release(self) -> None:
        if self.sender.exchanges.get(self.msg_id) is self:
            del self.sender.exchanges[self.msg_id]  # answered (or ended): the slot is free again

    def _emit_body(self, body: bytes, final: bool, head: tuple[int, dict] | None = None) -> None:
        """Body text in messages of at most PIECE_CHARS; ``head`` (status, headers) rides on the first.

        One message where one will do: two small writes in a row meet Nagle's algorithm and delayed
        ACKs on a gateway's websocket (~40 ms each). Nothing goes to a sender that cancelled."""
        if self.gone:
            return
        text = body.decode("utf-8", "replace")
        pieces = [text[i : i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)] or [""]
        for i, piece in enumerate(pieces):
            content: dict[str, Any] = {"body": piece, "final": final and i == len(pieces) - 1}
            if head is not None and i == 0:
                content["status"], content["headers"] = head
            content["seq"] = self.seq
            self.seq += 1
            self.carrier._send(self.idents, self.parent, REPLY, content)


class _Sender:
    __slots__ = ("exchanges", "last_seen")

    def __init__(self, last_seen: float) -> None:
        self.last_seen = last_seen
        self.exchanges: dict[str, _ControlPort] = {}

    @property
    def streams(self) -> int:
        return sum(1 for port in self.exchanges.values() if port.streaming)


def header_type(frames: list[Any]) -> str | None:
    """The msg_type of a raw control message, when it may be ours (a cheap look, no signature check)."""
    for i, frame in enumerate(frames):
        raw = getattr(frame, "bytes", frame)
        if raw == DELIM:
            if i + 2 >= len(frames):
                return None
            header = getattr(frames[i + 2], "bytes", frames[i + 2])
            if b"mcp_" not in header:
                return None
            try:
                return str(json.loads(header).get("msg_type"))
            except (ValueError, AttributeError):
                return None
    return None


_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _header_text(value: str) -> bool:
    """A value HTTP/1.1 could carry: Latin-1, no CR, LF or NUL."""
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return "\r" not in value and "\n" not in value and "\0" not in value


class ControlCarrier:
    """Serves one hub's MCP on the kernel's control channel (see the module docstring)."""

    def __init__(
        self,
        mcp: Any,
        kernel: Any,
        loop: Any,
        executor: Any,
        max_body_bytes: int,
        info: Callable[[], dict],
        on_client: Callable[[int], None] | None = None,
    ):
        self.mcp = mcp
        self.kernel = kernel
        self.loop = loop  # the hub's loop: every exchange lives there
        self.executor = executor
        self.max_body_bytes = max_body_bytes
        self.info = info
        self.on_client = on_client  # told +1 / -1 as senders come and go (the GIL switch interval)
        self.stream = kernel.control_stream
        self.control_loop = self.stream.io_loop
        self.threaded = bool(getattr(kernel, "control_thread", None))
        self.senders: dict[str, _Sender] = {}
        self._installed = False
        self._sweep: Any = None
        self.driver = ExchangeDriver(mcp, executor)

    # -- on the control thread ---------------------------------------------------------------
    def install(self) -> None:
        """Take our messages off the control stream (on the control thread, where it lives)."""
        self._installed = True
        self.control_loop.add_callback(self.stream.on_recv, self._on_recv, copy=False)
        self.loop.call_soon_threadsafe(self._schedule_sweep)

    def uninstall(self) -> None:
        """Give the control stream back to ipykernel alone. Open streams stay until the server
        closes them (``McpServer.close`` gives listens their final result, which still goes out)."""
        if not self._installed:
            return
        self._installed = False
        self.control_loop.add_callback(self.stream.on_recv, self.kernel.dispatch_control, copy=False)
        try:
            self.loop.call_soon_threadsafe(self._stop_sweep)
        except RuntimeError:
            pass

    def receive_raw(self, frames: list[Any]) -> Any:
        """One raw control message (the control thread): ours is taken, anything else goes to
        ipykernel's own dispatch (also what the hub's hold during loading hands over)."""
        return self._on_recv(frames)

    def _on_recv(self, frames: list[Any]) -> Any:
        if header_type(frames) not in OURS or not self._installed:
            return self.kernel.dispatch_control(frames)
        session = self.kernel.session
        try:
            idents, rest = session.feed_identities(frames, copy=False)
            msg = session.deserialize(rest, content=True, copy=False)
        except Exception as exc:  # a bad signature or a malformed message: nothing answers it
            log.warning("control channel: refused a message: %s", exc)
            return None
        try:
            self.loop.call_soon_threadsafe(self._receive, idents, msg)
        except RuntimeError:  # the hub's loop is gone: the hub is stopping
            pass
        return None

    def _send(self, idents: list[Any], parent: dict[str, Any], msg_type: str, content: dict[str, Any]) -> None:
        """Queue one message to the sender (sent by the control thread, in order)."""
        self.control_loop.add_callback(
            self.kernel.session.send, self.stream, msg_type, content, parent=parent, ident=idents
        )

    # -- on the hub's loop -------------------------------------------------------------------
    def _receive(self, idents: list[Any], msg: dict[str, Any]) -> None:
        header = msg.get("header") or {}
        if lone_surrogate_path(header) is not None:  # a reply echoes the header: it could not be sent
            log.warning("control channel: dropped a message whose header is not UTF-8 text")
            return
        kind = header.get("msg_type")
        sender_id = str(header.get("session") or "")
        sender = self.senders.get(sender_id)
        if sender is None:
            sender = self.senders[sender_id] = _Sender(time.monotonic())
            self._client(+1)
        sender.last_seen = time.monotonic()
        content = msg.get("content") if isinstance(msg.get("content"), dict) else {}
        if kind == INFO:
            self._send(idents, msg, INFO_REPLY, self._info())
        elif kind == REQUEST:
            self._request(sender, idents, msg, content)
        elif kind == CANCEL and isinstance(content.get("request"), str):
            self._cancel(sender, content["request"])
        if not sender.exchanges and kind != REQUEST and sender_id in self.senders:
            del self.senders[sender_id]  # nothing open: nothing to remember
            self._client(-1)

    def _client(self, delta: int) -> None:
        if self.on_client is not None:
            self.on_client(delta)

    def _info(self) -> dict[str, Any]:
        if not self.threaded:
            return {
                "status": "error",
                "reason": "no_control_thread",
                "message": "this kernel handles control messages on its main thread (no separate control "
                "thread: ipykernel < 6, or an embedded kernel): MCP over the control channel would wait "
                "for every running cell, so it is not offered. Use ipykernel >= 6.",
            }
        return {"status": "ok", **self.info()}

    def _request(self, sender: _Sender, idents: list[Any], msg: dict[str, Any], content: dict[str, Any]) -> None:
        """Refuse a malformed or unbounded request, else hand it to the driver with its in-flight
        slot taken; the port's final call (exactly one, on every path) gives the slot back."""
        msg_id = msg["header"].get("msg_id")
        problem = self._check(content)
        if problem is None and (not isinstance(msg_id, str) or not msg_id or not _encodable(msg_id)):
            problem = 400, "the message header needs a msg_id (a string)"
        if problem is None and msg_id in sender.exchanges:  # replies go by msg_id: one exchange per id
            problem = 409, "a request with this msg_id is still open (msg_ids must be unique)"
        port = _ControlPort(self, sender, msg_id if isinstance(msg_id, str) else "", idents, msg)
        if problem is not None:
            port.send_reply(status_reply(*problem))
            return
        if not self.threaded:
            port.send_reply(carrier_error(503, self._info()["message"]))
            return
        if len(sender.exchanges) >= MAX_IN_FLIGHT:
            port.send_reply(status_reply(429, f"more than {MAX_IN_FLIGHT} requests in flight", {"Retry-After": "1"}))
            return
        if not sender.exchanges and sum(1 for s in self.senders.values() if s.exchanges) >= MAX_SENDERS:
            port.send_reply(
                status_reply(429, f"more than {MAX_SENDERS} senders with open requests", {"Retry-After": "1"})
            )
            return
        sender.exchanges[msg_id] = port
        headers = {k.lower(): v for k, v in content["headers"].items()}
        req = HttpRequest(content["method"], headers, content.get("body", "").encode())
        try:
            self.driver.start(port, req)
        except Exception:  # a bug in writing the reply: logged, the slot released
            log.exception("control channel: request %s failed", msg_id)
            port._release()

    def _check(self, content: dict[str, Any]) -> tuple[int, str] | None:
        """Why a request message is malformed (status, message), or None. Strings must be text that
        HTTP could carry: a lone surrogate cannot be encoded, a CR or LF in a header cannot be sent."""
        method = content.get("method")
        if not isinstance(method, str) or method not in METHODS:
            return 405, "method must be GET, POST or DELETE"
        headers = content.get("headers")
        if not isinstance(headers, dict) or len(headers) > MAX_HEADERS:
            return 400, f"headers must be an object of at most {MAX_HEADERS} strings"
        for k, v in headers.items():
            if not isinstance(k, str) or not isinstance(v, str) or len(v) > MAX_HEADER_CHARS:
                return 400, f"header names and values must be strings (values of at most {MAX_HEADER_CHARS} chars)"
            if _HEADER_NAME.fullmatch(k) is None or not _header_text(v):
                return 400, "header names must be HTTP tokens, values Latin-1 text without CR, LF or NUL"
        body = content.get("body", "")
        if not isinstance(body, str):
            return 400, "body must be a string"
        if len(body) > self.max_body_bytes:
            return 413, f"request body larger than {self.max_body_bytes} bytes"
        if not _encodable(body):
            return 400, "body holds an unpaired UTF-16 surrogate (not UTF-8 text)"
        return None

    def _cancel(self, sender: _Sender, msg_id: str) -> None:
        """End a request's open stream; nothing more is sent for it (a request still being
        answered is not affected: its answer releases it)."""
        port = sender.exchanges.get(msg_id)
        if port is None or not port.streaming or port.exchange is None:
            return
        port.gone = True
        port.exchange.cancel()

    def _schedule_sweep(self) -> None:
        if self._installed:
            self._sweep = self.loop.call_later(SWEEP_SECONDS, self._sweep_senders)

    def _sweep_senders(self) -> None:
        """End the streams of senders not heard from (a server that went away sends no cancel)."""
        now = time.monotonic()
        for sender_id, sender in list(self.senders.items()):
            if now - sender.last_seen > SENDER_IDLE_SECONDS:
                for msg_id in [m for m, port in sender.exchanges.items() if port.streaming]:
                    self._cancel(sender, msg_id)
            if not sender.exchanges:  # nothing open: nothing to remember
                del self.senders[sender_id]
                self._client(-1)
        self._schedule_sweep()

    def _stop_sweep(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for _ in self.senders:
            self._client(-1)
        self.senders.clear()

    @property
    def open_streams(self) -> int:
        return sum(s.streams for s in list(self.senders.values()))  # read from other threads: copy first
