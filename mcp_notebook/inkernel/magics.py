"""The ``%mcp`` line magic: status, clients, hide/show a variable, stop/start the hub.

Registered by ``load_ipython_extension`` and removed by ``unload_ipython_extension``, so it
stays usable after ``%mcp stop``. Nothing it prints contains the token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from . import lifecycle

USAGE = """\
%mcp                 status: URL, clients, subscriptions, resources
%mcp clients         connected clients and what they watch
%mcp hide NAME...    stop exposing variables (until %mcp show)
%mcp show NAME...    expose them again
%mcp stop            stop the hub (the magic stays)
%mcp start           start it again
%mcp panel           the hub panel (ipywidgets; text where widgets are unavailable)
%mcp browse [KIND] [TEXT]  the resource browser, optionally filtered"""
# What %mcp panel and %mcp browse display: the package API's panel() and browser(), given when the
# magic is registered (the widgets' room sits above this one and imports it, never the reverse).
VIEWS: dict[str, Callable[..., Any]] = {}


def mcp_magic(line: str) -> None:
    """Control the mcp-notebook hub: %mcp [clients|hide NAME|show NAME|stop|start|help]."""
    words = line.split()
    cmd, args = (words[0].lower(), words[1:]) if words else ("status", [])
    kernel_hub = lifecycle.current()
    running = kernel_hub is not None and kernel_hub.running
    if cmd in ("help", "-h", "--help"):
        print(USAGE)
    elif cmd == "start":
        if running:
            print(f"mcp-notebook is already serving at {kernel_hub.url}")
        else:
            from IPython import get_ipython

            lifecycle.start(get_ipython())
    elif cmd == "stop":
        if running:
            lifecycle.stop()
            print("mcp-notebook stopped; %mcp start serves again")
        else:
            print("mcp-notebook is not running")
    elif not running:
        print("mcp-notebook is stopped: %mcp start serves again")
    elif cmd == "status":
        print(status(kernel_hub))
    elif cmd == "clients":
        print(clients(kernel_hub))
    elif cmd in ("panel", "browse"):
        from IPython.display import display

        show = VIEWS.get(cmd)
        if show is None:
            print(f"%mcp {cmd}: no view was registered with the magic")
            return
        display(show() if cmd == "panel" else show(*args[:2]))
    elif cmd in ("hide", "show"):
        if not args:
            print(f"usage: %mcp {cmd} NAME [NAME ...]")
            return
        kernel_hub.set_hidden(args, cmd == "hide")
        shown = ", ".join(args)
        print(f"hidden from MCP clients: {shown}" if cmd == "hide" else f"exposed again: {shown}")
    else:
        print(f"unknown subcommand {cmd!r}\n{USAGE}")


def status(kernel_hub: Any) -> str:
    server = kernel_hub.server
    sessions, listens = server.sessions(), server.listens()
    subs = sum(len(s.subscriptions) for s in sessions) + sum(len(li.uris) for li in listens)
    resources = len(kernel_hub.resources.list_resources())
    templates = len(kernel_hub.resources.list_templates())
    lines = [
        f"mcp-notebook serving at {kernel_hub.url}",
        f"clients: {len(sessions)} session(s), {len(listens)} listen stream(s); subscriptions: {subs}",
        f"resources: {resources} (+{templates} templates); cells seen: {kernel_hub.resources.cells_seen}",
    ]
    hidden = sorted(kernel_hub.variables.user_hidden)
    if hidden:
        lines.append(f"hidden by %mcp hide: {', '.join(hidden)}")
    tool_clients, tool_watched = kernel_hub.server.tools.watches.counts()
    if tool_clients:
        lines.append(f"tool clients: {tool_clients}, watching {tool_watched} resource(s) they read")
    if kernel_hub.runtime_file:
        lines.append(f"runtime file (URL and token for the CLI): {kernel_hub.runtime_file}")
    lines.append(autoload_line())
    return "\n".join(lines)


def autoload_line() -> str:
    """Whether new kernels of this environment (or this profile) load the extension by themselves."""
    from ..commands.autoload import running_kernel_state

    on = [state for state in running_kernel_state() if state.enabled]
    if on:
        return "autoload: on (" + ", ".join(str(state.path) for state in on) + "; mcp-notebook autoload off undoes it)"
    return "autoload: off (mcp-notebook autoload on loads it in every kernel of this environment)"


def clients(kernel_hub: Any) -> str:
    server = kernel_hub.server
    now = time.monotonic()
    lines = []
    for s in server.sessions():
        info = s.client_info or {}
        who = f"{info.get('name', '?')} {info.get('version', '')}".strip()
        watched = ", ".join(sorted(s.subscriptions)) or "nothing"
        lines.append(
            f"session {s.id[:6]}…  {who}  MCP {s.version}  streams: {len(s.streams)}  "
            f"idle {now - s.last_used:.0f}s  watching: {watched}"
        )
    for li in server.listens():
        watched = ", ".join(sorted(li.uris)) or "nothing"
        extra = " + list changes" if li.list_changed else ""
        lines.append(f"listen stream {li.sub_id!r}  MCP 2026-07-28  watching: {watched}{extra}")
    for key, idle, uris in server.tools.watches.snapshot():
        watched = ", ".join(uris) or "nothing"
        lines.append(f"tool client {key}  idle {idle:.0f}s  watching (read through tools): {watched}")
    return "\n".join(lines) if lines else "no clients connected"


def register_magics(shell: Any, views: Mapping[str, Callable[..., Any]]) -> None:
    """``%mcp`` in ``shell``; ``views``: what ``%mcp panel`` and ``%mcp browse`` display."""
    VIEWS.update(views)
    shell.register_magic_function(mcp_magic, magic_kind="line", magic_name="mcp")


def unregister_magics(shell: Any) -> None:
    manager = getattr(shell, "magics_manager", None)
    if manager is None:
        return
    manager.magics.get("line", {}).pop("mcp", None)
    if hasattr(manager.user_magics, "mcp"):
        delattr(manager.user_magics, "mcp")
