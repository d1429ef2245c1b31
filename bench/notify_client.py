"""One official SDK client in a process of its own, for bench/notify.py's paired timing: subscribed
(legacy) or listening (2026-07-28) to ``nb://vars/counter``; prints ``imported``, connects when
told ``go`` on stdin (so the bench opens its clients in an order it chooses), prints ``ready`` once
subscribed, then
``time.time()`` of each ``notifications/resources/updated`` of that URI, one line each, until
stdin closes. A process of its own: two clients in one process (or next to the bench's reader
threads) would wait for each other's loop and GIL, and their arrivals would bunch together.

    python bench/notify_client.py URL MODE   (the bearer token, if any, on the first line of stdin)
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URI = "nb://vars/counter"


def arrived() -> None:
    print(f"{time.time():.6f}", flush=True)


async def run(url: str, mode: str, token: str) -> None:
    async def on_message(msg: Any) -> None:
        if mode == "legacy" and isinstance(msg, types.ResourceUpdatedNotification) and str(msg.params.uri) == URI:
            arrived()

    async def until_stdin_closes() -> None:
        await anyio.to_thread.run_sync(sys.stdin.read)

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, message_handler=on_message, cache=None) as client:
            if mode == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.subscribe_resource(URI)
                await anyio.sleep(0.5)  # the client opens its GET stream after initialize
                print("ready", flush=True)
                await until_stdin_closes()
                return
            async with client.listen(resource_subscriptions=[URI]) as sub, anyio.create_task_group() as tg:

                async def reader() -> None:
                    async for ev in sub:
                        if getattr(ev, "uri", None) is not None and str(ev.uri) == URI:
                            arrived()

                tg.start_soon(reader)
                print("ready", flush=True)
                await until_stdin_closes()
                tg.cancel_scope.cancel()


def main() -> int:
    url, mode = sys.argv[1], sys.argv[2]
    token = sys.stdin.readline().strip()
    print("imported", flush=True)  # the slow part is done: the bench says when to connect
    if sys.stdin.readline().strip() != "go":
        return 0
    anyio.run(run, url, mode, token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
