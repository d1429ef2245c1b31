"""How the server extension reaches a kernel's control channel: through the kernel gateway's
websocket (a ``--gateway-url`` server), or over ZeroMQ with the kernel manager's connection info
(a kernel of this server whose provisioner puts it elsewhere). Both only carry messages; what they
mean is bridge/claude_push.py's business.

The gateway's websocket also carries every IOPub message of the kernel; a message is parsed only
when its text names one of our reply types, so cell outputs cost a substring search.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Protocol

from .. import portable
from ..logs import log
from ..transport.control_wire import FROM_HUB

REPLY_TYPES = FROM_HUB
CONNECT_SECONDS = 20.0
# get_msg waits in a poller of its own on the socket's edge-triggered descriptor; a send on the same
# socket (another request, a keepalive) reads ZMQ_EVENTS and can consume the edge a reply raised.
# Without a timeout that poller then slept for good with the reply queued unread (every later
# request of the kernel timed out: one run in ~15 of test_gateway's ZeroMQ pair); each new poll
# looks at the queue first, so a lost wake-up now costs at most this long.
POLL_SECONDS = 0.25
SEND_LINGER_MS = 1000  # how long a closed control socket still tries to deliver its last messages
QUICKACK = getattr(socket, "TCP_QUICKACK", None)

OnMessage = Callable[[dict[str, Any]], None]


class WireClosed(Exception):
    """The way to the kernel is gone (the gateway closed the websocket, the kernel died)."""


class Wire(Protocol):
    """A connection to one kernel's control channel, on the server's event loop."""

    closed: bool

    async def open(self, on_message: OnMessage, on_close: Callable[[], None]) -> None: ...

    def send(self, msg_type: str, content: dict[str, Any]) -> str:
        """Send a control message; returns its msg_id (replies carry it as their parent)."""
        ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None:
        """After :meth:`close`: until its reader has ended."""
        ...


def _header(msg_type: str, session: str) -> dict[str, Any]:
    return {
        "msg_id": uuid.uuid4().hex,
        "msg_type": msg_type,
        "username": "mcp-notebook",
        "session": session,
        "date": datetime.now(timezone.utc).isoformat(),
        "version": "5.3",
    }


async def gateway_websocket(kernel_id: str, session: str) -> Any:
    """A kernel's channels websocket at the gateway (``GatewayClient``'s URL, headers and auth)."""
    from jupyter_server.gateway.gateway_client import GatewayClient
    from jupyter_server.utils import url_path_join
    from tornado.escape import url_escape
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    gateway = GatewayClient.instance()
    url = url_path_join(gateway.ws_url or "", gateway.kernels_endpoint, url_escape(kernel_id), "channels")
    url += f"?session_id={session}"
    kwargs = gateway.load_connection_args()
    kwargs["connect_timeout"] = min(float(kwargs.get("connect_timeout") or CONNECT_SECONDS), CONNECT_SECONDS)
    kwargs["request_timeout"] = min(float(kwargs.get("request_timeout") or CONNECT_SECONDS), CONNECT_SECONDS)
    ws = await asyncio.wait_for(
        websocket_connect(HTTPRequest(url, **kwargs), max_message_size=64 * 1024 * 1024), CONNECT_SECONDS
    )
    stream = _stream(ws)
    if stream is not None:
        with contextlib.suppress(Exception):
            stream.set_nodelay(True)  # our requests go out at once
    return ws


def _stream(ws: Any) -> Any:
    """A websocket's IOStream (tornado keeps it on the connection's protocol)."""
    return getattr(getattr(ws, "protocol", None), "stream", None) or getattr(ws, "stream", None)


def quick_ack(ws: Any) -> None:
    """ACK what came in at once: the gateway's websocket does not disable Nagle's algorithm, so
    a reply written right after the kernel's IOPub traffic would wait for our delayed ACK
    (~40 ms). Linux only, and not on the portable path (MCP_NOTEBOOK_PORTABLE); re-armed after each
    read (the kernel clears it)."""
    sock = getattr(_stream(ws), "socket", None)
    if sock is not None and QUICKACK is not None and not portable.ON:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)


class GatewayWire:
    """The kernel's channels websocket at the gateway (``GatewayClient``'s URL, headers and auth)."""

    def __init__(self, kernel_id: str):
        self.kernel_id = kernel_id
        self.session = uuid.uuid4().hex
        self.closed = False
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def open(self, on_message: OnMessage, on_close: Callable[[], None]) -> None:
        self._ws = await gateway_websocket(self.kernel_id, self.session)
        self._reader = asyncio.ensure_future(self._read(on_message, on_close))

    async def _read(self, on_message: OnMessage, on_close: Callable[[], None]) -> None:
        try:
            while True:
                text = await self._ws.read_message()
                quick_ack(self._ws)
                if text is None:
                    return
                if isinstance(text, bytes):
                    continue  # binary frames carry buffers; ours are all JSON text
                if '"mcp_' not in text:
                    continue  # IOPub traffic, cell replies: not ours
                with contextlib.suppress(ValueError, TypeError):
                    msg = json.loads(text)
                    ours = isinstance(msg, dict) and msg.get("channel") == "control"
                    if ours and msg.get("msg_type") in REPLY_TYPES and isinstance(msg.get("parent_header"), dict):
                        on_message(msg)
        except Exception as exc:  # a broken websocket ends the wire; the channel says so to its requests
            log.info("gateway websocket of kernel %s ended: %s", self.kernel_id, exc)
        finally:
            self.closed = True
            on_close()

    def send(self, msg_type: str, content: dict[str, Any]) -> str:
        if self.closed or self._ws is None:
            raise WireClosed(f"the gateway connection of kernel {self.kernel_id} is closed")
        header = _header(msg_type, self.session)
        msg = {
            "header": header,
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": "control",
            "buffers": [],
        }
        try:
            self._ws.write_message(json.dumps(msg))
        except Exception as exc:
            self.closed = True
            raise WireClosed(str(exc)) from None
        return header["msg_id"]

    def close(self) -> None:
        self.closed = True
        if self._ws is not None:
            self._ws.close()
        if self._reader is not None:
            self._reader.cancel()

    async def wait_closed(self) -> None:
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)


class ZmqWire:
    """The kernel's control socket, with the kernel manager's connection info and key."""

    def __init__(self, kernel_manager: Any, kernel_id: str):
        self.kernel_id = kernel_id
        self._km = kernel_manager
        self.closed = False
        self._client: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def open(self, on_message: OnMessage, on_close: Callable[[], None]) -> None:
        client = self._km.get_kernel(self.kernel_id).client()
        client.start_channels(shell=False, iopub=False, stdin=False, hb=False, control=True)
        self._client = client
        self._reader = asyncio.ensure_future(self._read(on_message, on_close))

    async def _read(self, on_message: OnMessage, on_close: Callable[[], None]) -> None:
        try:
            channel = self._client.control_channel
            while True:
                try:
                    msg = await channel.get_msg(timeout=POLL_SECONDS)
                except queue.Empty:
                    continue
                if msg.get("msg_type") in REPLY_TYPES and isinstance(msg.get("parent_header"), dict):
                    on_message(msg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("control socket of kernel %s ended: %s", self.kernel_id, exc)
        finally:
            self.closed = True
            on_close()

    def send(self, msg_type: str, content: dict[str, Any]) -> str:
        if self.closed or self._client is None:
            raise WireClosed(f"the control socket of kernel {self.kernel_id} is closed")
        msg = self._client.session.msg(msg_type, content)
        self._client.control_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def close(self) -> None:
        self.closed = True
        if self._reader is not None:
            self._reader.cancel()
        if self._client is not None:
            with contextlib.suppress(Exception):  # stop_channels drops what is queued (linger 0):
                socket = self._client.control_channel.socket  # what was sent last still goes out
                if socket is not None:  # (an mcp_cancel: the hub ends that stream)
                    socket.close(linger=SEND_LINGER_MS)
            with contextlib.suppress(Exception):
                self._client.stop_channels()

    async def wait_closed(self) -> None:
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
