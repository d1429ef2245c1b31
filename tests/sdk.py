"""The official MCP Python SDK client (mcp 2.x), connected to a hub with its bearer token."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


class Inbox:
    """Collects server notifications delivered to the client's message handler."""

    def __init__(self) -> None:
        self.updated: list[str] = []
        self.list_changed = 0
        self.event = anyio.Event()

    async def handle(self, msg: Any) -> None:
        if isinstance(msg, types.ResourceUpdatedNotification):
            self.updated.append(str(msg.params.uri))
        elif isinstance(msg, types.ResourceListChangedNotification):
            self.list_changed += 1
        else:
            return
        self.event.set()
        self.event = anyio.Event()

    async def wait_for(self, predicate: Any, timeout: float = 10) -> None:
        with anyio.fail_after(timeout):
            while not predicate(self):
                await self.event.wait()


@contextlib.asynccontextmanager
async def connect(
    info: dict[str, Any],
    mode: str = "auto",
    token: str | None = None,
    extensions: Any = None,
    event_hooks: dict[str, list[Any]] | None = None,
    read_timeout: float = 300,
) -> AsyncIterator[tuple[Client, Inbox]]:
    """An SDK client in the given mode ("auto" is the SDK default) plus its notification inbox
    (``event_hooks``: httpx's, to see each request and reply; ``read_timeout``: the longest silence
    of a stream before the client gives up on it, the SDK's default 300 s)."""
    headers = {}
    tok = token if token is not None else info.get("token")
    if tok:
        headers["Authorization"] = f"Bearer {tok}"
    inbox = Inbox()
    timeout = httpx2.Timeout(30, read=read_timeout)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=event_hooks) as http:
        transport = streamable_http_client(info["url"], http_client=http)
        async with Client(
            transport, message_handler=inbox.handle, mode=mode, cache=None, extensions=extensions
        ) as client:
            yield client, inbox
