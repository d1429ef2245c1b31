"""``MCP_NOTEBOOK_PORTABLE=1``: every Linux-only fast path off, as a macOS or Windows machine runs.

Read once, when the package is first imported (set it before the kernel starts, or before
``%load_ext``). Each fast path consults :data:`ON` where it decides:

- the post-cell hook's copy of the namespace dict's slot table (``process_vm_readv``,
  postcell/dict_table.py): the names and values are listed instead;
- ``/proc/<pid>/stat`` (runtime.py: is a hub's process a zombie?): not read;
- ``TCP_QUICKACK`` on the server extension's gateway websocket (serverext/wires.py): not set;
- uvloop (transport/loop.py): asyncio's own loop, without the polling selector;
- client sockets read and written with calls that keep the GIL (transport/libc_socket.py,
  transport/held_stream.py): the loop's own transports instead;
- busy polling after a reply (transport/latency.py): the loop sleeps at once.

Any value but empty, ``0``, ``false``, ``no`` or ``off`` turns it on. ``nb://kernel`` reports the
paths in force (``fast_paths``).
"""

from __future__ import annotations

import os

ENV = "MCP_NOTEBOOK_PORTABLE"


def _read(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


ON: bool = _read(os.environ.get(ENV))
