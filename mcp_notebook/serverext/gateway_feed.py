"""A kernel behind a Kernel Gateway, watched through what the gateway relays: the kernel's channels
websocket at the gateway, with a session of its own, read and never written.

jupyter_server's kernel websocket (which the Kernel Gateway serves) forwards every IOPub message of
the kernel to every websocket open on it, whichever client sent the request: the same feed a local
kernel's IOPub subscription gives (serverside/watch.py). Opening it makes the gateway nudge the kernel
once with a ``kernel_info_request`` (it does so for every browser tab); nothing else is sent, but for
the variable reads a user asks for (:class:`GatewayAsker`: the idle-only requests of serverside/shell.py,
whose replies the gateway routes back to this websocket alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

from ..logs import log
from ..serverside.shell import NoAnswer, ShellAsker
from .wires import _header, gateway_websocket, quick_ack


class GatewayFeed:
    """One gateway kernel's IOPub, as the gateway relays it, handed to ``on_message`` (the server's loop)."""

    def __init__(self, kernel_id: str, on_message: Callable[[dict[str, Any]], None], on_close: Callable[[], None]):
        self.kernel_id = kernel_id
        self.session = uuid.uuid4().hex
        self.closed = False
        self._ws: Any = None
        self._loop = asyncio.get_running_loop()
        self._expected: dict[str, Callable[[dict[str, Any]], None]] = {}  # msg_id -> its reply's taker
        self._task = asyncio.ensure_future(self._run(on_message, on_close))

    async def _run(self, on_message: Callable[[dict[str, Any]], None], on_close: Callable[[], None]) -> None:
        try:
            self._ws = await gateway_websocket(self.kernel_id, self.session)
            while not self.closed:
                text = await self._ws.read_message()
                quick_ack(self._ws)  # the gateway's next write (a cell's idle, a reply) waits for no ACK of ours
                if text is None:
                    return
                if isinstance(text, bytes):
                    continue  # binary frames (a widget's buffers)
                if '"iopub"' not in text and not any(msg_id in text for msg_id in list(self._expected)):
                    continue  # the replies to the gateway's nudge
                try:
                    msg = json.loads(text)
                except (ValueError, RecursionError):
                    continue
                if isinstance(msg, dict) and msg.get("channel") == "iopub":
                    self._hand(on_message, msg)
                elif isinstance(msg, dict):
                    self._reply(msg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the gateway went away or refused: the watch opens a new feed later
            log.info("gateway feed of kernel %s ended: %s", self.kernel_id, exc)
        finally:
            self.closed = True
            if self._ws is not None:
                with contextlib.suppress(Exception):
                    self._ws.close()
            on_close()

    def _hand(self, on_message: Callable[[dict[str, Any]], None], msg: dict[str, Any]) -> None:
        """One relayed message to the watch; a malformed one is dropped, the feed goes on."""
        try:
            on_message(msg)
        except Exception:
            log.warning("a message relayed for kernel %s could not be read", self.kernel_id, exc_info=True)

    def _reply(self, msg: dict[str, Any]) -> None:
        """A reply to a request of ours (the gateway routes it to this websocket alone)."""
        parent = msg.get("parent_header")
        msg_id = parent.get("msg_id") if isinstance(parent, dict) else None
        take = self._expected.pop(msg_id, None) if isinstance(msg_id, str) else None
        if take is not None and isinstance(msg.get("content"), dict):
            take(msg["content"])

    def request(
        self,
        channel: str,
        msg_type: str,
        content: dict[str, Any],
        take: Callable[[dict], None],
        before: Callable[[str], None],
    ) -> str:
        """Send one request of ours (from any thread): ``before`` gets its msg_id before it leaves,
        ``take`` its reply's content. Its msg_id."""
        header = _header(msg_type, self.session)
        msg = {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": channel}
        self._expected[header["msg_id"]] = take
        before(str(header["msg_id"]))

        def write() -> None:
            if self._ws is not None and not self.closed:
                with contextlib.suppress(Exception):
                    self._ws.write_message(json.dumps(msg))

        self._loop.call_soon_threadsafe(write)
        return str(header["msg_id"])

    def forget(self, msg_id: str) -> None:
        self._expected.pop(msg_id, None)

    def close(self) -> None:
        self.closed = True
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._ws.close()
        self._task.cancel()


class GatewayAsker(ShellAsker):
    """serverside/shell.py's reads of a gateway kernel, over its feed's websocket (idle only, one at a
    time, bounded: the rules of :class:`~mcp_notebook.serverside.shell.ShellAsker`)."""

    def __init__(
        self, feed: Callable[[], GatewayFeed | None], idle: Callable[[], bool], mark_ours: Callable[[str], None]
    ):
        super().__init__(dict, None, idle, mark_ours)
        self.feed = feed

    def _roundtrip(
        self, msg_type: str, content: dict[str, Any], timeout: float, published: bool, channel: str
    ) -> tuple[dict, Any]:
        feed = self.feed()
        if feed is None or feed.closed or feed._ws is None:
            raise NoAnswer("the gateway's websocket to this kernel is not open (it reopens within seconds)")
        answered, reply = threading.Event(), []
        event, got = threading.Event(), []

        def take(found: dict[str, Any]) -> None:
            reply.append(found)
            answered.set()

        def before(msg_id: str) -> None:  # marked ours and awaited before it leaves
            self.mark_ours(msg_id)
            self._waiting[msg_id] = (event, got)

        msg_id = feed.request(channel, msg_type, content, take, before)
        try:
            if not answered.wait(timeout):
                raise NoAnswer(f"the kernel did not answer {msg_type} through the gateway within {timeout:g} s")
            if published and not event.wait(timeout + 0.5):
                raise NoAnswer("the kernel ended the read without publishing its result")
            return reply[0], (got[0] if got else None)
        finally:
            self._waiting.pop(msg_id, None)
            feed.forget(msg_id)
