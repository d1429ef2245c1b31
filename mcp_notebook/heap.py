"""A server's start-up heap out of the cyclic collector's way (servers, never a user's kernel).

A long-running server builds most of its objects as it starts: modules, classes, settings, routes.
CPython's full collections walk all of them each time, and every request in flight waits: ~90 ms
in the JupyterHub service, 200-340 ms in a user's Jupyter server with JupyterLab (~280,000
objects), every few seconds of steady reads (docs/DESIGN.md, "The tarpit's and the notifications'
tail"). One collection, then the survivors frozen (``gc.freeze``): later full collections walk only
what came since. Frozen objects are still freed by reference counting; only a cycle among them is
never collected, and start-up objects live as long as the process anyway.
"""

from __future__ import annotations

import gc


def settle_heap() -> int:
    """Collect once, freeze what survived; the number of objects now frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
