"""A kernel behind a Kernel Gateway, watched through what the gateway relays: the kernel's channels
websocket at the gateway, with a session of its own, read and never written.

jupyter_server's kernel websocket (which the Kernel Gateway serves) forwards every IOPub message of
the kernel to every websocket open on it, whichever client sent the request: the same feed a local
kernel's IOPub subscription gives (serverside/watch.py). Opening it makes the gateway nudge the kernel
once with a ``kernel_info_request`` (it does so for every browser tab); nothing else is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from typing import Any

from ..logs import log
from .wires import gateway_websocket


class GatewayFeed:
    """One gateway kernel's IOPub, as the gateway relays it, handed to ``on_message`` (the server's loop)."""

    def __init__(self, kernel_id: str, on_message: Callable[[dict[str, Any]], None], on_close: Callable[[], None]):
        self.kernel_id = kernel_id
        self.session = uuid.uuid4().hex
        self.closed = False
        self._ws: Any = None
        self._task = asyncio.ensure_future(self._run(on_message, on_close))

    async def _run(self, on_message: Callable[[dict[str, Any]], None], on_close: Callable[[], None]) -> None:
        try:
            self._ws = await gateway_websocket(self.kernel_id, self.session)
            while not self.closed:
                text = await self._ws.read_message()
                if text is None:
                    return
                if isinstance(text, bytes) or '"iopub"' not in text:
                    continue  # binary frames (a widget's buffers), replies to the gateway's nudge
                with contextlib.suppress(ValueError, RecursionError):
                    msg = json.loads(text)
                    if isinstance(msg, dict) and msg.get("channel") == "iopub":
                        on_message(msg)
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

    def close(self) -> None:
        self.closed = True
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._ws.close()
        self._task.cancel()
