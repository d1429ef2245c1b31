"""The ``mcp-notebook`` command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args.seconds)


def _list_remote(args: argparse.Namespace) -> int:
    """``list --server URL``: the kernels with a hub on a Jupyter server (its extension's listing)."""
    from ..bridge.hub_selection import NoHub
    from ..bridge.remote import RemoteSelector, TokenError, read_token, server_base

    try:
        selector = RemoteSelector(server=server_base(args.server), token=read_token(args.token_file))
        entries = selector.listing()
    except (TokenError, ValueError, NoHub, OSError) as exc:
        print(f"mcp-notebook list: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    if not entries:
        print(f"no kernel with an mcp-notebook hub on {selector.server}")
        return 0
    rows = [("KERNEL", "NOTEBOOK", "REVISIONS")]
    rows += [
        (e["kernel_id"], e.get("notebook_path") or "-", ",".join(e.get("protocol_versions") or [])) for e in entries
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _list(args: argparse.Namespace) -> int:
    if getattr(args, "server", None):
        return _list_remote(args)
    from ..runtime import discover, runtime_dir

    records = discover(clean=not args.keep_stale)
    if args.json:
        print(json.dumps([r.public() for r in records], indent=2))
        return 0
    if not records:
        print(f"no mcp-notebook hubs running (runtime dir {runtime_dir()})")
        return 0
    rows = [("KERNEL", "NOTEBOOK", "URL", "PID", "STATE")]
    for r in records:
        state = "alive" if r.alive else ("stale" if args.keep_stale else "stale (removed)")
        rows.append((r.kernel_id or "-", r.notebook_path or "-", r.url, str(r.pid or "-"), state))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _bridge(args: argparse.Namespace) -> int:
    if args.server:
        from ..bridge.remote import TokenError, run_remote_bridge

        try:
            return run_remote_bridge(
                args.server,
                args.token_file,
                args.notebook,
                args.kernel,
                args.reconnect_timeout,
                latest=args.latest,
                channel=args.channel,
            )
        except (TokenError, ValueError) as exc:
            print(f"mcp-notebook bridge: {exc}", file=sys.stderr)
            return 2
    from ..bridge.stdio import run_bridge

    return run_bridge(args.notebook, args.kernel, args.reconnect_timeout, latest=args.latest, channel=args.channel)


def _changes(args: argparse.Namespace) -> int:
    from .changes import CursorError, Selection, local_lister, parse_since, remote_lister, run_changes

    try:
        since = parse_since(args.since or [])
        if args.server:
            from ..bridge.remote import read_token, server_base

            lister = remote_lister(server_base(args.server), read_token(args.token_file))
        else:
            lister = local_lister()
    except (CursorError, ValueError) as exc:  # (TokenError is a ValueError)
        print(f"mcp-notebook changes: {exc}", file=sys.stderr)
        return 2
    selection = Selection(args.kernel, args.notebook, args.latest)
    return run_changes(lister, selection, since, args.follow, args.grace)


def _remote_config(args: argparse.Namespace, selection: list[str]) -> dict:
    """The entry for a kernel on a remote Jupyter server (``--server``), through its server extension."""
    from ..bridge.hub_selection import NoHub
    from ..bridge.remote import TOKEN_ENVS, RemoteSelector, read_token, server_base
    from . import clients_config as cc

    server = server_base(args.server)
    token = read_token(args.token_file)
    if args.http and not selection:  # every kernel of the server, at one URL that never changes
        return cc.entry(args.host, bridge_args=[], url=server + "mcp-notebook/mcp", token=token, scheme="token")
    if args.http:
        try:
            record = RemoteSelector(args.notebook, args.kernel, server=server, token=token).find()
        except NoHub as exc:
            raise cc.ConfigError(str(exc)) from None
        return cc.entry(args.host, bridge_args=[], url=record.url, token=token, scheme="token")
    bridge_args = ["--server", server, *selection]
    if args.token_file:
        bridge_args += ["--token-file", str(Path(args.token_file).expanduser().resolve())]
        return cc.entry(args.host, bridge_args=bridge_args)
    return cc.entry(args.host, bridge_args=bridge_args, env={TOKEN_ENVS[0]: token})


def _bridge_selection(args: argparse.Namespace) -> list[str]:
    """The bridge's arguments in a config entry: which hub, and the Claude Code channel if asked."""
    selection = (
        ["--notebook", args.notebook]
        if args.notebook
        else ["--kernel", args.kernel]
        if args.kernel
        else ["--latest"]
        if args.latest
        else []
    )
    return [*selection, "--channel"] if args.channel else selection


def _config(args: argparse.Namespace) -> int:
    from ..bridge.hub_selection import NoHub, Selector
    from . import clients_config as cc

    if args.channel and (args.host != "claude-code" or args.http):
        print("mcp-notebook config: --channel is for Claude Code's stdio bridge (no --http)", file=sys.stderr)
        return 1
    selection = _bridge_selection(args)
    try:
        if args.server:
            from ..bridge.remote import TokenError

            try:
                server = _remote_config(args, selection)
            except (TokenError, ValueError) as exc:
                print(f"mcp-notebook config: {exc}", file=sys.stderr)
                return 1
        elif args.http:
            try:
                record = Selector(args.notebook, args.kernel).find()
            except NoHub as exc:
                print(f"mcp-notebook config: {exc}", file=sys.stderr)
                return 1
            server = cc.entry(args.host, bridge_args=selection, url=record.url, token=record.token)
        else:
            server = cc.entry(args.host, bridge_args=selection)  # no selection: every kernel
        if args.write or args.path or args.gitignore:
            path = cc.write(args.host, Path(args.path) if args.path else cc.default_path(args.host), args.name, server)
            print(f"wrote the {args.name!r} server for {args.host} to {path}")
            print(f"next: {cc.next_steps(args.host, args.name)}")
            if args.channel:
                print(f"then: {cc.channel_steps(args.name)}")
            holds_token = bool(args.http or (args.server and not args.token_file))
            if holds_token or args.gitignore:
                _token_file_notice(path, args.gitignore, secret=holds_token, server=bool(args.server))
            return 0
    except cc.ConfigError as exc:
        print(f"mcp-notebook config: {exc}", file=sys.stderr)
        return 1
    _print_snippet(args.host, args.name, server)
    print(
        f"add it to {cc.default_path(args.host)} (or use --write); then: {cc.next_steps(args.host, args.name)}",
        file=sys.stderr,
    )
    if args.server and not args.token_file:
        print(
            "note: the Jupyter token is not printed; --write puts it into the config file (mode 0600).",
            file=sys.stderr,
        )
    elif args.http:
        print(
            "note: the token is not printed; --write puts it into the config file (mode 0600). "
            "The URL changes when the kernel restarts unless MCPHub.port is fixed: prefer the bridge.",
            file=sys.stderr,
        )
    return 0


def _print_snippet(host: str, name: str, server: dict) -> None:
    """The entry as the host's file spells it (TOML for Codex, JSON for the others), tokens masked."""
    from . import clients_config as cc

    if host == "codex":
        from .clients_toml import table

        print(table(name, cc.masked(server)), end="")
    else:
        print(json.dumps(cc.snippet(host, name, cc.masked(server)), indent=2))


def _autoload(args: argparse.Namespace) -> int:
    from .autoload import run

    return run(args.action, prefix=args.prefix, user=args.user, profile=args.profile)


def _token_file_notice(path: Path, gitignore: bool, secret: bool, server: bool = False) -> None:
    """A written entry that holds a token (hub or Jupyter): keep that file out of version control (stderr only)."""
    from . import clients_config as cc

    if gitignore:
        try:
            print(f"added {path.name} to {cc.add_to_gitignore(path)}", file=sys.stderr)
            return
        except cc.ConfigError as exc:
            print(f"mcp-notebook config: {exc}", file=sys.stderr)
    if secret:
        print(
            f"warning: {path} now holds a token (mode 0600); keep it out of version control "
            "(rerun with --gitignore to add it to the repository's .gitignore"
            + (", or prefer --token-file)" if server else ", or prefer the bridge: drop --http)"),
            file=sys.stderr,
        )


class _Help(argparse.RawDescriptionHelpFormatter):
    """Descriptions keep their paragraphs; every option that has a default value shows it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default not in (None, False, argparse.SUPPRESS) and "%(default)" not in text and action.option_strings:
            text += " (default: %(default)s)"
        return text


def _add_selection(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--notebook", metavar="PATH", help="only the kernel of this notebook (path as the kernel knows it)"
    )
    group.add_argument("--kernel", metavar="ID", help="only this kernel id (or a unique prefix of it)")
    group.add_argument("--latest", action="store_true", help="only the most recently started hub")


def _add_remote(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server",
        metavar="URL",
        help="a (remote) Jupyter server with the mcp-notebook extension; its token comes from "
        "$MCP_NOTEBOOK_SERVER_TOKEN or $JUPYTER_TOKEN, or --token-file",
    )
    p.add_argument("--token-file", metavar="PATH", help="file holding the Jupyter server's token (with --server)")


BRIDGE_TEXT = """\
Speak MCP on stdio (for hosts that only start stdio servers) and forward to the kernels' hubs.

With no selection it serves EVERY kernel with a hub on this machine (or, with --server, on that
Jupyter server) through one endpoint: nb://kernels lists them, nb://kernels/{kernel}/... reads one
of them ({kernel}: its notebook's name or its id), and bare URIs such as nb://vars/df address the
current kernel (the notebook focused last in JupyterLab, else the one that ran a cell last).
Kernels that start later are found as they come.

To pin one kernel instead, pass --notebook PATH, --kernel ID or --latest; the bridge then waits
up to --reconnect-timeout seconds for that kernel's hub when it restarts."""

CONFIG_TEXT = """\
Print the MCP server entry that starts `mcp-notebook bridge` for one host, or merge it into the
host's config file (--write, or --path FILE).

host: claude-code (.mcp.json in the current directory), claude-desktop (the app's
claude_desktop_config.json in your user config), vscode (.vscode/mcp.json), cursor
(.cursor/mcp.json), codex ($CODEX_HOME/config.toml, default ~/.codex/config.toml: a
[mcp_servers.NAME] table; the rest of the file is kept byte for byte). The entry
runs this environment's mcp-notebook by absolute path; with no selection it serves every kernel.
Other entries in the file are kept; --name picks the entry's name."""


def _add_bridge(command: Callable[..., argparse.ArgumentParser]) -> None:
    bridge = command("bridge", "speak MCP on stdio for every kernel (or one), for stdio-only hosts", BRIDGE_TEXT)
    _add_selection(bridge)
    bridge.add_argument(
        "--reconnect-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="with a selection: how long to wait for its kernel's hub after a restart",
    )
    bridge.add_argument(
        "--channel",
        action="store_true",
        help="Claude Code channels (research preview): push one event per cell that changed what the session read",
    )
    _add_remote(bridge)
    bridge.set_defaults(func=_bridge)


CHANGES_TEXT = """\
Print one JSON line per change of the kernels' hubs on this machine (or, with --server, on that
Jupyter server): a cell finished or failed ({"event": "cell", "status": "ok"|"error", "duration",
"changed": [names], "uri", "cursor", ...}), a kernel restarted, died or started. With --follow it
runs until SIGINT/SIGTERM: start it in Claude Code's Monitor tool and each line reaches the
conversation. Every line has a cursor; pass the last one seen for each kernel with --since to resume
after a reconnect without losing or repeating a change. Without --follow: the changes after --since,
then exit."""


def _add_changes(command: Callable[..., argparse.ArgumentParser]) -> None:
    changes = command("changes", "print one JSON line per cell that ran, restart or kernel death", CHANGES_TEXT)
    changes.add_argument("--follow", action="store_true", help="keep following until SIGINT/SIGTERM")
    changes.add_argument(
        "--since",
        action="append",
        metavar="CURSOR",
        help="resume after this line's cursor (KERNEL@EPOCH.CELL); once per kernel",
    )
    changes.add_argument(
        "--grace", type=float, default=10.0, metavar="S", help="a kernel missing this long is reported dead"
    )
    _add_selection(changes)
    _add_remote(changes)
    changes.set_defaults(func=_changes)


def _add_config(command: Callable[..., argparse.ArgumentParser]) -> None:
    config = command("config", "print (or --write) the MCP config entry for a host", CONFIG_TEXT)
    config.add_argument(
        "host",
        choices=("claude-code", "claude-desktop", "vscode", "cursor", "codex"),
        help="the MCP host to configure: claude-code, claude-desktop, vscode, cursor or codex "
        "(see above for the file each uses)",
    )
    _add_selection(config)
    config.add_argument("--http", action="store_true", help="the HTTP endpoint of a running hub instead of the bridge")
    config.add_argument("--write", action="store_true", help="merge the entry into the host's config file")
    config.add_argument("--path", metavar="FILE", help="config file to write (implies --write; default: the host's)")
    config.add_argument("--name", default="notebook", help="server name in the config")
    config.add_argument(
        "--channel",
        action="store_true",
        help="Claude Code only: the bridge with --channel (pushes what cells change; research preview)",
    )
    config.add_argument(
        "--gitignore", action="store_true", help="add the written file to the repository's .gitignore (implies --write)"
    )
    _add_remote(config)
    config.set_defaults(func=_config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-notebook",
        description="A live Jupyter kernel as an MCP server. Load it in a kernel with %load_ext mcp_notebook; "
        "these commands find, bridge and configure it.",
        formatter_class=_Help,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help, description=description or help[0].upper() + help[1:] + ".", formatter_class=_Help
        )

    demo = command("demo", "start a kernel with sample data and serve it until Ctrl-C")
    demo.add_argument("--seconds", type=float, default=None, help="stop after this many seconds (none: until Ctrl-C)")
    demo.set_defaults(func=_demo)

    lst = command(
        "list",
        "list the running hubs on this machine (stale runtime files are removed), or a server's",
    )
    lst.add_argument("--json", action="store_true", help="JSON output (never includes tokens)")
    lst.add_argument("--keep-stale", action="store_true", help="show stale files without removing them")
    _add_remote(lst)
    lst.set_defaults(func=_list)

    _add_bridge(command)
    _add_changes(command)
    _add_config(command)

    autoload = command(
        "autoload",
        "load mcp_notebook in every kernel of this environment (on), stop doing so (off), or show (status)",
    )
    autoload.add_argument("action", choices=("on", "off", "status"), help="on, off or status")
    where = autoload.add_mutually_exclusive_group()
    where.add_argument("--prefix", help="environment prefix to configure (none: the Python running this command)")
    where.add_argument("--user", action="store_true", help="the user's IPython profile instead (all environments)")
    autoload.add_argument("--profile", default="default", help="IPython profile for --user")
    autoload.set_defaults(func=_autoload)

    doctor = command("doctor", "show what this Python can serve, the running hubs and the Jupyter extensions")
    doctor.add_argument("--json", action="store_true", help="JSON output")
    doctor.set_defaults(func=_doctor)
    return parser


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import main as doctor

    return doctor(as_json=args.json)


def _version() -> str:
    from .. import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
