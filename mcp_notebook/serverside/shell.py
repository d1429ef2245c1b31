"""Requests of our own to a kernel (an ``inspect_request`` or an opted-in snippet on shell, a debugger
``inspectVariables`` on control), from a
worker thread: a DEALER socket of our own per request (the kernel routes the reply to it alone),
signed with the kernel's session, only while the kernel is idle, one at a time, bounded in time.

A snippet's result comes back on IOPub (the watcher hands it to :meth:`ShellAsker.deliver`), its
end on shell (``execute_reply``): both are awaited.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

SETTLE_SECONDS = 1.0  # how long a read waits for a kernel that is finishing a cell to say idle


class KernelBusy(Exception):
    """The kernel runs or queued a cell: nothing of ours is sent (it would wait behind the cell)."""


class NoAnswer(Exception):
    """The kernel did not answer our request in time."""


class ShellAsker:
    """One kernel's shell, for our reads (see the module docstring)."""

    def __init__(
        self,
        connection: Callable[[], dict[str, Any]],
        session: Any,
        idle: Callable[[], bool],
        mark_ours: Callable[[str], None],
    ):
        self.connection = connection  # the kernel's connection info (re-read: a restart may move it)
        self.session = session
        self.idle = idle
        self.mark_ours = mark_ours
        self._one = threading.Lock()
        self._waiting: dict[str, tuple[threading.Event, list[Any]]] = {}

    def deliver(self, parent: str, data: Any) -> None:
        """A result published on IOPub for our request ``parent`` (the watcher's thread)."""
        slot = self._waiting.get(parent)
        if slot is not None:
            slot[1].append(data)
            slot[0].set()

    def ask(
        self, msg_type: str, content: dict[str, Any], timeout: float, published: bool = False, channel: str = "shell"
    ) -> tuple[dict, Any]:
        """(the reply's content, what IOPub brought for it when ``published``); ``channel``: shell, or
        control for a debug_request."""
        if not self._one.acquire(timeout=timeout):
            raise KernelBusy("another read of this kernel is running")
        try:
            settle = time.monotonic() + SETTLE_SECONDS  # a cell's idle comes a moment after its reply
            while not self.idle():
                if time.monotonic() > settle:
                    raise KernelBusy("the kernel is running a cell")
                time.sleep(0.02)
            return self._roundtrip(msg_type, content, timeout, published, channel)
        finally:
            self._one.release()

    def _roundtrip(
        self, msg_type: str, content: dict[str, Any], timeout: float, published: bool, channel: str
    ) -> tuple[dict, Any]:
        """One request and its reply, on a DEALER socket of our own (a gateway's asker overrides it)."""
        import zmq

        info = self.connection()
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.linger = 0
        try:
            sock.connect(f"{info.get('transport', 'tcp')}://{info['ip']}:{info[channel + '_port']}")
            return self._exchange(sock, msg_type, content, timeout, published)
        finally:
            sock.close(0)

    def _exchange(self, sock: Any, msg_type: str, content: dict, timeout: float, published: bool) -> tuple[dict, Any]:
        import zmq

        msg = self.session.msg(msg_type, content)
        msg_id = msg["header"]["msg_id"]
        self.mark_ours(msg_id)
        event, got = threading.Event(), []
        self._waiting[msg_id] = (event, got)
        try:
            self.session.send(sock, msg)
            deadline = time.monotonic() + timeout
            reply = None
            while reply is None:
                left = deadline - time.monotonic()
                if left <= 0 or not sock.poll(int(left * 1000), zmq.POLLIN):
                    raise NoAnswer(f"the kernel did not answer {msg_type} within {timeout:g} s")
                _, frames = self.session.feed_identities(sock.recv_multipart(copy=True))
                found = self.session.deserialize(frames)
                if (found.get("parent_header") or {}).get("msg_id") == msg_id:
                    reply = found.get("content") or {}
            if published and not event.wait(max(0.0, deadline - time.monotonic()) + 0.5):
                raise NoAnswer("the kernel ended the read without publishing its result")
            return reply, (got[0] if got else None)
        finally:
            self._waiting.pop(msg_id, None)


def snippet_request(code: str) -> dict[str, Any]:
    """A silent execute_request: no history, no execution count, no output, no user_expressions."""
    return {
        "code": code,
        "silent": True,
        "store_history": False,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": False,
    }
