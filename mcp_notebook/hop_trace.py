"""A notification's path, hop by hop: a bench-only trace, off unless ``MCP_NOTEBOOK_HOP_TRACE``
names a directory when the process starts (read once, at import).

Off, a hop costs one attribute test at its call site (``if hop_trace.ON:``). On, each hop writes
one line, ``time.time()``, the hop's name, the thread's name and a short detail, to
``<dir>/<pid>.tsv`` (line-buffered, so a process that is killed loses nothing), which
bench/notify_hops.py lines up with the kernel's cell ends and the client's arrivals (the same
clock: one machine). Nothing secret is written: a hop's detail is a resource URI the caller chose.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

DIRECTORY = os.environ.get("MCP_NOTEBOOK_HOP_TRACE") or None
ON = DIRECTORY is not None
_out: list[TextIO] = []
_lock = threading.Lock()


def stamp(hop: str, detail: str = "") -> None:
    """One line for ``hop`` now (call only when :data:`ON`)."""
    line = f"{time.time():.6f}\t{hop}\t{threading.current_thread().name}\t{detail[:200]}\n"
    with _lock:
        if not _out:
            assert DIRECTORY is not None
            out = open(os.path.join(DIRECTORY, f"{os.getpid()}.tsv"), "a", buffering=1)
            out.write("#\t" + _whose() + "\n")
            _out.append(out)
        _out[0].write(line)


def _whose() -> str:
    """The program and the module it runs (``-m``): whose hops (a kernel, a server...). Not its other
    arguments: a server's command line may carry a token."""
    argv = sys.argv
    named = [argv[0]] if argv else []
    if "-m" in argv[:-1]:
        named.append(argv[argv.index("-m") + 1])
    return " ".join(named)[:300].replace("\n", " ").replace("\t", " ")


def uri_in(data: bytes, marker: bytes = b"nb://vars/") -> str:
    """The first ``nb://vars/...`` URI named in ``data`` ('' if none): a hop's detail."""
    at = data.find(marker)
    if at < 0:
        return ""
    end = at
    while end < len(data) and data[end : end + 1] not in b'"\\ \n':
        end += 1
    return data[at:end].decode("utf-8", "replace")


__all__ = ["ON", "stamp", "uri_in"]
