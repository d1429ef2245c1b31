"""The hub thread's event loop and listening socket."""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from .. import portable
from .latency import BusyPoll, PollingSelector

log = logging.getLogger(__name__)


def new_loop(kind: str = "auto", poll: BusyPoll | None = None) -> asyncio.AbstractEventLoop:
    """The hub thread's own loop: uvloop's when installed (``kind`` "auto", the default, or
    "uvloop"), else asyncio's. ``MCP_NOTEBOOK_LOOP`` (auto, uvloop, asyncio) overrides ``kind``.

    uvloop reads and waits without the GIL and writes without giving it up, so a read during a
    busy cell waits for the GIL once instead of twice (p50 ~5.6 vs ~10 ms), and serves more reads
    per second; see docs/DESIGN.md. asyncio's loop gets the polling selector instead. On the
    portable path (MCP_NOTEBOOK_PORTABLE) it is always asyncio's own loop.
    """
    if portable.ON:  # as on Windows: asyncio's own loop, no polling selector
        return asyncio.new_event_loop()
    kind = os.environ.get("MCP_NOTEBOOK_LOOP", "") or kind
    if kind != "asyncio":
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                log.warning("uvloop was asked for but is not installed; using asyncio")
        else:
            return uvloop.new_event_loop()
    if poll is not None:
        return asyncio.SelectorEventLoop(PollingSelector(poll))
    return asyncio.new_event_loop()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening, non-blocking TCP socket; errors (address in use) surface to the caller."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if os.name != "nt":  # reuse a port in TIME_WAIT; an active listener still conflicts
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
