#!/usr/bin/env python3
"""Rooms with one meaning each (issue #33): move mcp_notebook's modules into rooms, replayably.

Run from the root of an mcp-notebook checkout on a clean tree:

    python scripts/dev/rooms.py            # apply (git mv + rewrites), print what it did
    python scripts/dev/rooms.py --check    # only say whether it applies, and what it would move

Everything is rule-based, so it also works on a later main with more files:

1. Refuses if the tree is dirty, if the move is already applied (mcp_notebook/inkernel/ exists or
   mcp_notebook/kernel.py is gone), or if the package root holds a module this table does not
   place (add it to MOVES or KEEP_AT_ROOT below, then run again).
2. Reads every tracked text file *before* moving anything, and rewrites:
   - every import statement naming the package (absolute, or relative from the file's old place)
     by the AST: the imported module is resolved from the file's old path, mapped, and written
     back relative from the file's new path (absolute stays absolute); ``from X import name``
     where ``X.name`` is a module follows that module (``from . import lifecycle`` becomes
     ``from .inkernel import lifecycle``); names moved by SPLITS follow their new module;
   - everywhere else (strings, comments, docs, toml, json, js): dotted paths
     ``mcp_notebook.a.b[.symbol]``, one-line ``from mcp_notebook[.x] import a, b`` inside strings,
     and file paths ``[mcp_notebook/]a/b.py`` / ``[mcp_notebook/]dir/`` naming a moved module.
   The longest matching old module wins, and each piece of text is rewritten exactly once.
3. Splits modules by SPLITS (render.py's user-code guard into guard.py): top-level definitions
   moved by name with their leading comments, imports each side needs recomputed.
4. ``git mv``s files and directories, writes the new rooms' ``__init__.py``, writes the rewritten
   texts at their new paths.
5. tests/test_house.py: LAYERS entries mapped by name, each moved module kept in its old layer,
   each new room package given the top layer of its members.
6. docs/DESIGN.md: the house tree (the first ``` block after "## The house") replaced by
   HOUSE_TREE below; modules the template does not name are reported (the house test fails on
   them).
7. ruff (from .venv/bin or PATH): import sorting on touched Python files, unused imports in split
   files, then format.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

PKG = "mcp_notebook"

# old module (dotted, relative to the package) -> new module. A package entry moves the whole
# directory (new files inside included). Longest match wins.
MOVES: dict[str, str] = {
    # the in-kernel hub and what hooks into IPython
    "kernel": "inkernel.kernel_hub",
    "lifecycle": "inkernel.lifecycle",
    "config": "inkernel.config",
    "activity": "inkernel.activity",
    "frontend_comm": "inkernel.lab_comm",
    "magics": "inkernel.magics",
    # the stdio bridge and what it reaches
    "bridge": "bridge.stdio",
    "remote": "bridge.remote",
    "hub_selection": "bridge.hub_selection",
    "stdio_input": "bridge.stdio_input",
    "channel": "bridge.claude_push",
    # the commands
    "cli": "commands.cli",
    "doctor": "commands.doctor",
    "demo": "commands.demo",
    "clients_config": "commands.clients_config",
    "clients_toml": "commands.clients_toml",
    "kernel_launch": "commands.kernel_launch",
    "autoload": "commands.autoload",
    # the post-cell diff engine
    "providers.nswatch": "postcell.nswatch",
    "providers.dict_table": "postcell.dict_table",
    "providers.nsdiff": "postcell.nsdiff",
    # one name, one thing
    "providers.kernel": "providers.kernel_info",
    "kernels": "allkernels",
    "serverext.channel": "serverext.control_client",
    "widgets.views": "widgets.panels",
}

# The package's common base: what every room imports, and the public entry points.
KEEP_AT_ROOT = {
    "__init__", "__main__", "version", "portable", "redact", "uri", "revisions", "types", "logs",
    "runtime", "render", "budget", "capture", "resources",
}  # fmt: skip

# New room packages and their docstrings.
ROOMS: dict[str, str] = {
    "inkernel": "The hub inside this kernel: KernelHub (kernel_hub.py), its settings (config.py), start and stop\n"
    "(lifecycle.py), what panels show of it (activity.py), the JupyterLab comm (lab_comm.py), %mcp (magics.py).",
    "bridge": "The stdio bridge: stdio.py (MCP over stdin/stdout to a hub or to every kernel), remote.py (a\n"
    "Jupyter server's hubs), hub_selection.py (which hub), claude_push.py (the Claude Code push).",
    "commands": "The ``mcp-notebook`` commands: cli.py and what its subcommands run (doctor, demo, client configs,\n"
    "the IPython autoload, a quiet kernel launch).",
    "postcell": "The post-cell diff engine: what a cell changed in the namespace (nswatch.py), read from the dict's\n"
    "own slot table (dict_table.py), the listing way as bytes (nsdiff.py).",
}

# old module -> (new module, docstring, names of top-level definitions that move)
SPLITS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "render": (
        "guard",
        '"""The user-code guard: a call into user code on a short-lived daemon thread, abandoned after a\n'
        "timeout (RenderTimeout); a call still stuck poisons only its own key (the object, the resource\n"
        'function and its arguments) until it returns, and at most MAX_STUCK are stuck at once."""\n',
        (
            "T",
            "MAX_STUCK",
            "_lock",
            "_stuck",
            "_stuck_anonymous",
            "RenderTimeout",
            "_key_of",
            "_context",
            "guarding",
            "stuck_count",
            "call_guarded",
            "_what",
        ),
    ),
}

# Names that meant a second thing, renamed with their module (new module -> {old name: new name}):
# applied with word boundaries in that module and in every text file naming it after the move.
SYMBOL_RENAMES: dict[str, dict[str, str]] = {
    "inkernel.lab_comm": {"CHANNEL": "LAB_COMM", "FrontendChannel": "LabComm"},
    "bridge.claude_push": {"Channel": "ClaudePush"},
}  # in Python files only (prose says "channel" of other things too)

TEXT_SUFFIXES = {
    ".py", ".md", ".toml", ".json", ".sh", ".ts", ".tsx", ".mjs", ".js", ".cfg", ".ini", ".txt", ".yml",
    ".yaml", ".ipynb", ".rst", ".html", ".in",
}  # fmt: skip
SKIP_PREFIXES = (
    "CHANGELOG.md",
    "mcp_notebook/labextension/",
    "mcp_notebook/views/",
    "views/node_modules/",
    "tests/node/",
)

HOUSE_TREE = """\
mcp_notebook/
  __init__.py        the public API: load/unload, resource(), connection_info(), hub(), notify(), the
                     panels (panel(), browser(), watch())
  __main__.py        python -m mcp_notebook (commands/cli.py); a room run by python -m (the JupyterHub
                     service) has its own __main__.py
  the common base, imported by every room:
  resources.py       Resources: provider registry, URI routing, watched-URI refcounts, change fan-out,
                     the change journal
  types.py           descriptors and contents every layer shares (rendered per revision, masked on
                     the way out) and the errors providers raise
  revisions.py       the MCP revisions, grouped by era, and which fields each one knows
  capture.py         what each cell ran and printed (CellCapture, Origins), read by the providers
  guard.py           the user-code guard: bounded, timed calls into user code (RenderTimeout)
  render.py          bounded rendering of any value (repr, type names), through the guard
  budget.py          the wire budget of a reply: one scale, the measured refit loop, cuts (issue #35)
  runtime.py         the runtime files: which hubs run here (HubRecord), for bridges and servers
  redact.py, logs.py, uri.py, version.py (the one version), portable.py (MCP_NOTEBOOK_PORTABLE)
  inkernel/          the hub inside this kernel:
                     kernel_hub.py  KernelHub, the hub: wires resources, protocol server, transport,
                                    hooks, runtime file
                     config.py      MCPHub, the hub's settings (a traitlets Configurable: every knob)
                     lifecycle.py   the hub running in this process: start, stop, who follows it
                     activity.py    what panels show of a running hub: recent notifications, session
                                    and listen rows, main-thread hand-off (no ipywidgets)
                     lab_comm.py    the JupyterLab extension's comm target (document, active cell,
                                    panel state)
                     magics.py      %mcp
  postcell/          the post-cell diff engine: nswatch.py (what a cell changed in the namespace),
                     dict_table.py (the dict's own slot table, copied safely), nsdiff.py (the
                     listing way, as bytes)
  providers/         base.py (the Provider interface: what a provider declares), variables.py (with
                     exposure.py: which names are exposed), kernel_info.py (nb://kernel), custom.py, typed.py, structured.py, optional.py
                     (missing libraries), and the data providers: frames.py (with frame_pages.py
                     and frame_schema.py, the page and schema of any table, frame_query.py and
                     frame_order.py, its sort and filter), tables/ (one adapter per family of
                     libraries: tables/base.py the interface, tables/pandas_frames.py,
                     tables/narwhals_frames.py, tables/numpy_arrays.py; tables/cells.py cells as
                     bounded JSON), engines.py, databases.py, cells.py, notebook.py, views.py (the
                     ui:// views of the MCP Apps), lineage.py (what each cell changed, each
                     variable's history), diffs.py (source and namespace diffs), history.py
                     (earlier sessions from IPython's history)
  views/             the MCP Apps views as built HTML (from the TypeScript in the top-level views/)
  protocol/          sans-IO MCP, by composition (see "One server, two eras"):
                     eras.py        the two eras' names, the stateless era's _meta keys, classify()
                     exchange.py    the carrier seam: ServerSettings, HttpRequest, HttpReply; Ctx
                     core.py        Core: what both eras share (resources, settings, tools, caches,
                                    the shared handlers, running one request under an era's rules)
                     handshake.py   HandshakeEra: initialize, sessions, batches, GET streams,
                                    subscribe/unsubscribe, setLevel, DELETE, fan-out to sessions
                     stateless.py   StatelessEra: _meta and header checks, server/discover, listen
                                    streams, clients seen by clientInfo, fan-out to listens
                     fast_read.py   FlatReads: a cached read of either era in one function; replays
                     families.py    head families: reads of one URI after another recognised in a
                                    request's bytes, both eras (what a carrier gets is opaque)
                     server.py      McpServer: admission, classify -> era, what a carrier calls
                     wire_stateless.py  the stateless era's rules on the wire (the Mcp-Name table,
                                    the header codec), for both ends: the protocol and every
                                    client of a hub (bridge/stdio.py, allkernels/upstream.py)
                     wire_sse.py    the one SSE parser (the bridge, the front's upstream)
                     jsonrpc.py (framing, errors), params.py (per-method param checks), cursors.py,
                     streams.py (SSE outboxes), security.py (Host/Origin/token, CORS), tools.py and
                     tool_watch.py (the tools and their per-client watches), apps.py (the MCP Apps
                     extension offered or not), tool_spec.py (what a tool is to clients) and
                     view_tools.py (the views' tools)
  transport/         the loopback HTTP/1.1 carrier: http11.py (sans-IO: request reading, chunked
                     bodies, status and header lines), connection.py (one asyncio connection
                     driving it), server.py (HttpTransport: socket, thread, connections, deadlines),
                     loop.py (uvloop or asyncio's loop, the listening socket), heads.py (admitted
                     heads remembered by their bytes, with the server's opaque replay memo),
                     busy_poll.py, switch.py (the GIL switch interval while a cell runs and a client
                     is connected); and control.py, the carrier on the kernel's control channel,
                     with control_wire.py (its message names and timings, for both ends);
                     client.py, an asyncio HTTP/1.1 client for requests to hubs (the server
                     extension, the front)
  widgets/           the ipywidgets panels: panels.py (panel, browser, watch), content.py (contents
                     as a client receives them)
  allkernels/        the front for every kernel: naming.py (URI scheme), directory.py, upstream.py
                     (requests and listen streams to hubs), links.py (the links inside replies,
                     qualified), provider.py, front.py, sse_replies.py (a front's streams written
                     by a tornado handler: the server extension's and the Hub service's)
  bridge/            the stdio bridge: stdio.py (local hubs or every kernel), stdio_input.py (its
                     stdin: bounded lines, strict decoding, a request pool that never blocks),
                     remote.py (a Jupyter server's, through its front), hub_selection.py (which hub
                     a bridge talks to), claude_push.py (the Claude Code push into a session:
                     bridge --channel)
  serverext/         the Jupyter server extension (a pipe to each kernel's hub; front.py: every
                     kernel at {base_url}mcp-notebook/mcp, and the focus; control_client.py and
                     wires.py: hubs on other hosts over the kernel's control channel; handlers.py,
                     the authenticated pipe and the kernel list; hubs.py, which kernels have a hub)
  hubservice/        the JupyterHub service (one MCP URL for every user, MCP authorization):
                     config.py, store.py (sqlite: hashes, sealed Hub tokens), cimd.py (client
                     metadata documents, fetched safely), oauth.py (authlib's server and grants),
                     users.py (a user's servers as a kernels directory), endpoint.py (the MCP
                     carrier, a front per grant), web.py (metadata, authorize, consent, token,
                     register, grants API), app.py (the process, run as __main__.py); imported
                     only by the Hub's service
  commands/          the mcp-notebook command: cli.py, doctor.py (what this Python can serve),
                     demo.py, clients_config.py (client configurations), clients_toml.py (Codex's
                     config.toml, edited as text), autoload.py (IPython startup), kernel_launch.py
                     (a quiet kernel)
labextension/        the JupyterLab 4 extension (TypeScript), built into mcp_notebook/labextension/
"""


def run(*cmd: str, check: bool = True) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        sys.exit(f"rooms: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return out.stdout


# ----------------------------------------------------------------------------- the module map


def old_modules(root: Path) -> dict[str, Path]:
    """Every module of the package today: dotted name (relative, "" the package) -> path."""
    out = {}
    for path in (root / PKG).rglob("*.py"):
        rel = path.relative_to(root / PKG)
        if rel.parts[0] == "labextension":
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def map_module(name: str) -> str:
    """The new dotted name (relative to the package) of an old one; unchanged if nothing moves it."""
    best = ""
    for old in MOVES:
        if (name == old or name.startswith(old + ".")) and len(old) > len(best):
            best = old
    if not best:
        return name
    return MOVES[best] + name[len(best) :]


def new_path(root: Path, old: Path) -> Path:
    """Where a file of the package goes."""
    rel = old.relative_to(root / PKG)
    parts = list(rel.with_suffix("").parts)
    is_init = parts[-1] == "__init__"
    name = ".".join(parts[:-1] if is_init else parts)
    mapped = map_module(name).split(".")
    if is_init:
        mapped.append("__init__")
    return root / PKG / Path(*mapped).with_suffix(old.suffix)


# ----------------------------------------------------------------------------- text rewriting

DOTTED = re.compile(rf"\b{PKG}((?:\.[A-Za-z_]\w*)+)")
FROM_IN_TEXT = re.compile(rf"\bfrom {PKG}((?:\.\w+)*) import ((?:\w+(?: as \w+)?)(?:, \w+(?: as \w+)?)*)")
PATHLIKE = re.compile(rf"(?<![\w/.\-])((?:{PKG}/)?(?:[a-z_]\w*/)*[a-z_]\w*)(\.py\b|/|\.(?=[A-Za-z_])(?!py\b))")


class Rewriter:
    def __init__(self, modules: dict[str, Path]):
        self.modules = set(modules)
        self.packages = {m for m, p in modules.items() if p.name == "__init__.py"}
        base_names: dict[str, int] = {}
        for m in modules:
            base_names[m.rsplit(".", 1)[-1]] = base_names.get(m.rsplit(".", 1)[-1], 0) + 1
        # a root module whose name another module shares: a bare "kernel.py" may mean either
        self.ambiguous = {m for m in modules if "." not in m and base_names[m] > 1}
        # in docs, `frontend_comm.Link.send`: a moved module named by its bare name, then attributes
        self.bare_dotted = {m for m in modules if m and base_names[m.rsplit(".", 1)[-1]] == 1 and map_module(m) != m}
        self.moved_symbols = {(src, n): dst for src, (dst, _, names) in SPLITS.items() for n in names}

    # a dotted name: longest old module prefix mapped, the rest kept (a symbol may follow a split)
    def dotted(self, rel: str) -> str:
        parts = rel.split(".")
        for i in range(len(parts), 0, -1):
            mod = ".".join(parts[:i])
            if mod in self.modules:
                rest = parts[i:]
                target = map_module(mod)
                if rest and (mod, rest[0]) in self.moved_symbols:
                    target = self.moved_symbols[(mod, rest[0])]
                return ".".join([target, *rest])
        return rel

    def from_groups(self, base: str, names: list[tuple[str, str | None]]) -> list[tuple[str, list[str]]]:
        """``from <base> import names`` (base absolute-relative to the package, "" the package) as
        groups (new base, rendered names) in first-seen order."""
        groups: dict[str, list[str]] = {}
        for name, alias in names:
            full = f"{base}.{name}".lstrip(".")
            if full in self.modules:
                new = map_module(full)
                nbase, _, nname = new.rpartition(".")
                rendered = nname if (alias or name) == nname else f"{nname} as {alias or name}"
            else:
                nbase = self.moved_symbols.get((base, name)) or (map_module(base) if base in self.modules else base)
                rendered = name if alias is None else f"{name} as {alias}"
            groups.setdefault(nbase, []).append(rendered)
        return list(groups.items())

    def text(self, s: str, markdown: bool) -> str:
        """Rewrite the free text of a file (not its import statements)."""

        def from_sub(m: re.Match) -> str:
            base = m.group(1).lstrip(".")
            names = []
            for part in m.group(2).split(", "):
                name, _, alias = part.partition(" as ")
                names.append((name, alias or None))
            groups = self.from_groups(base, names)
            return "; ".join(f"from {'.'.join(filter(None, [PKG, b]))} import {', '.join(n)}" for b, n in groups)

        s = FROM_IN_TEXT.sub(from_sub, s)
        s = DOTTED.sub(lambda m: PKG + "." + self.dotted(m.group(1)[1:]), s)

        def path_sub(m: re.Match) -> str:
            path, tail = m.group(1), m.group(2)
            if tail == "." and "/" not in path:
                return m.group(0)  # a dotted name, not a path (DOTTED and the bare rule handle those)
            prefixed = path.startswith(PKG + "/")
            rel = path[len(PKG) + 1 :] if prefixed else path
            mod = rel.replace("/", ".")
            if tail == ".py" and "/" not in path and mod in self.ambiguous:
                before = m.string[m.string.rfind("\n", 0, m.start()) + 1 : m.start()]
                dirs = re.findall(r"(?<![\w/.\-])((?:[a-z_]\w*/)+)", before)
                if dirs and (dirs[-1].replace("/", ".") + mod) in self.modules:
                    mod = dirs[-1].replace("/", ".") + mod  # `serverext/hubs.py`, `channel.py`
                    new = map_module(mod).rsplit(".", 1)[-1]
                    return m.group(0) if new == rel else new + tail
            if mod not in self.modules or (tail == "/" and (mod not in self.packages or not (prefixed or markdown))):
                return m.group(0)
            new = map_module(mod)
            if new == mod:
                return m.group(0)
            return (PKG + "/" if prefixed else "") + new.replace(".", "/") + tail

        s = PATHLIKE.sub(path_sub, s)
        if markdown:

            def bare_sub(m: re.Match) -> str:
                for mod in self.bare_dotted:
                    if mod.rsplit(".", 1)[-1] == m.group(1):
                        return "`" + map_module(mod) + "."
                return m.group(0)

            s = re.sub(r"`([a-z_]\w*)\.(?=[A-Za-z_])(?!py\b)", bare_sub, s)
        return s


def module_of(root: Path, path: Path) -> tuple[str, bool] | None:
    """(dotted module, is package) of a file of the package, else None."""
    try:
        rel = path.relative_to(root / PKG)
    except ValueError:
        return None
    parts = list(rel.with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_pkg else parts), is_pkg


def relative(from_mod: str, from_is_pkg: bool, target: str) -> str:
    """``target`` (relative to the package) as a relative import from ``from_mod``."""
    here = from_mod.split(".") if from_mod else []
    here = here if from_is_pkg else here[:-1]
    there = target.split(".") if target else []
    common = 0
    while common < len(here) and common < len(there) and here[common] == there[common]:
        common += 1
    dots = "." * (len(here) - common + 1)
    return dots + ".".join(there[common:])


def rewrite_python(rw: Rewriter, root: Path, path: Path, src: str) -> str:
    old = module_of(root, path)
    new = None
    if old is not None:
        new = module_of(root, new_path(root, path))
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return rw.text(src, markdown=False)
    lines = src.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def pos(lineno: int, col: int) -> int:
        return offsets[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode(errors="ignore"))

    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if old is None:
                    continue
                here = old[0].split(".") if old[0] else []
                here = here if old[1] else here[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join(here + ([node.module] if node.module else []))
                absolute = False
            elif (node.module or "").split(".")[0] == PKG:
                base = (node.module or "").removeprefix(PKG).lstrip(".")
                absolute = True
            else:
                continue
            groups = rw.from_groups(base, [(a.name, a.asname) for a in node.names])
            original_names = [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names]
            if (
                len(groups) == 1
                and groups[0][1] == original_names
                and groups[0][0] == base
                and (absolute or old == new)
            ):
                continue

            def head(b: str, absolute: bool = absolute) -> str:
                if absolute:
                    return ".".join(filter(None, [PKG, b]))
                assert new is not None
                return relative(new[0], new[1], b)

            indent = " " * node.col_offset
            stmts = [f"from {head(b)} import {', '.join(n)}" for b, n in groups]
            start, end = pos(node.lineno, node.col_offset), pos(node.end_lineno, node.end_col_offset)
            edits.append((start, end, ("\n" + indent).join(stmts)))
        elif isinstance(node, ast.Import):
            if not any(a.name.split(".")[0] == PKG for a in node.names):
                continue
            parts = []
            for a in node.names:
                name = a.name
                if name.split(".")[0] == PKG and "." in name:
                    name = PKG + "." + rw.dotted(name[len(PKG) + 1 :])
                parts.append(name if a.asname is None else f"{name} as {a.asname}")
            start, end = pos(node.lineno, node.col_offset), pos(node.end_lineno, node.end_col_offset)
            edits.append((start, end, "import " + ", ".join(parts)))
    edits.sort()
    out, cursor = [], 0
    for start, end, repl in edits:
        out.append(rw.text(src[cursor:start], markdown=False))
        out.append(repl)
        cursor = end
    out.append(rw.text(src[cursor:], markdown=False))
    return "".join(out)


# ----------------------------------------------------------------------------- splitting a module


def split_module(src: str, names: tuple[str, ...], new_mod: str, doc: str) -> tuple[str, str]:
    """(what stays, the new module): top-level statements defining ``names`` move with the comment
    lines right above them; imports are copied to the new module and cleaned by ruff (F401)."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    moving: list = []
    imports: list[str] = []
    for node in tree.body:
        defined: set[str] = set()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined = {node.name}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined = {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append("".join(lines[node.lineno - 1 : node.end_lineno]))
        if defined and defined <= set(names):
            first = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
            while first > 0 and lines[first - 1].lstrip().startswith("#"):
                first -= 1
            moving.append((first, node.end_lineno, isinstance(node, (ast.Assign, ast.AnnAssign))))
    moved_text = ""
    for i, (a, b, simple) in enumerate(moving):
        if i:
            moved_text += "" if simple and moving[i - 1][2] else "\n\n"
        moved_text += "".join(lines[a:b]).strip("\n") + "\n"
    moving = [(a, b) for a, b, _ in moving]
    keep = [line for i, line in enumerate(lines) if not any(a <= i < b for a, b in moving)]
    stay = re.sub(r"\n{3,}", "\n\n\n", "".join(keep))
    used_here = {n.id for n in ast.walk(ast.parse(stay)) if isinstance(n, ast.Name)}
    needed = sorted(n for n in names if n in used_here)
    if needed:
        anchor = imports[-1]
        stay = stay.replace(anchor, anchor + f"from .{new_mod} import {', '.join(needed)}\n", 1)
    new_src = (
        doc
        + "\nfrom __future__ import annotations\n\n"
        + "".join(i for i in imports if "__future__" not in i)
        + "\n\n"
        + moved_text
    )
    return stay, new_src


# ----------------------------------------------------------------------------- the house


def rewrite_layers(src: str, modules: dict[str, Path]) -> tuple[str, list[str]]:
    """tests/test_house.py: map LAYERS' names; keep each moved module in its old layer; give each new
    room package the top layer of its members; a split module goes beside its source."""
    tree = ast.parse(src)
    node = next(
        n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign)) and "LAYERS" == getattr(
            n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", None)
    )  # fmt: skip
    layers = [[e.value for e in t.elts] for t in node.value.elts]

    def layer_of(name: str, table: list[list[str]]) -> int:
        best, rank = -1, -1
        for i, names in enumerate(table):
            for n in names:
                if (name == n or (n and name.startswith(n + "."))) and len(n) > best:
                    best, rank = len(n), i
        return rank

    new_layers = [[map_module(n) if n else n for n in names] for names in layers]
    original = {n for names in new_layers for n in names}
    notes = []
    for mod in sorted(modules):
        was = layer_of(mod, layers)
        target = map_module(mod)
        if was >= 0 and layer_of(target, new_layers) != was:
            new_layers[was].append(target)
            notes.append(f"LAYERS: {target} kept in layer {was}")
    for src_mod, (dst, _, _) in SPLITS.items():
        i = layer_of(src_mod, new_layers)
        new_layers[i].append(dst)
        notes.append(f"LAYERS: {dst} beside {src_mod} (layer {i})")
    for room in ROOMS:
        members = [layer_of(map_module(m), new_layers) for m in modules if map_module(m).startswith(room + ".")]
        if layer_of(room, new_layers) < 0 or [n for names in new_layers for n in names].count(room) == 0:
            top = max(members)
            new_layers[top].append(room)
            notes.append(f"LAYERS: room {room} in layer {top} (its top member's)")
    # drop the entries this script added that a same-layer room covers, keep order
    for i, names in enumerate(new_layers):
        seen: list[str] = []
        for n in names:
            covered = n not in original and any(p and n.startswith(p + ".") for p in names if p != n)
            if n not in seen and not covered:
                seen.append(n)
        new_layers[i] = seen
    # write back: element texts replaced in place, so comments survive
    edits = []
    for t, names in zip(node.value.elts, new_layers, strict=True):
        first, last = t.elts[0], t.elts[-1]
        body = ", ".join(f'"{n}"' for n in names)
        edits.append((first.lineno, first.col_offset, last.end_lineno, last.end_col_offset, body))
    lines = src.splitlines(keepends=True)
    for l1, c1, l2, c2, body in sorted(edits, reverse=True):
        head, tail = lines[l1 - 1][:c1], lines[l2 - 1][c2:]
        if "," not in body and not tail.lstrip().startswith(","):
            body += ","  # a one-name tuple
        lines[l1 - 1 : l2] = [head + body + tail]
    return "".join(lines), notes


# DESIGN's "Imports point down" sentence names modules bare: each old name is mapped (a room's
# module as room/name), and these follow the name they are written after.
SENTENCE_INSERTS = {"render": "guard", "providers": "postcell/"}


def _fragment(old_tree: str, name: str) -> str:
    """``name.py`` and what the old tree said of it, up to the next comma or the end of the
    parenthesis it sits in (``links.py (the links inside replies, qualified)``)."""
    at = re.search(rf"(?<![\w./]){re.escape(name)}", old_tree)
    if not at:
        return name
    depth, i = 0, at.end()
    while i < len(old_tree):
        ch = old_tree[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        elif ch in ",;" and depth == 0:
            break
        i += 1
    return old_tree[at.start() : i].strip()


def _append_to_entry(tree: str, room: str, frag: str) -> str:
    """Add ``frag`` to the tree entry of ``room`` (a new entry before labextension/ if none)."""
    lines = tree.splitlines(keepends=True)
    head = next((i for i, line in enumerate(lines) if line.startswith("  " + room + " ")), None)
    if head is None or room == "/":
        cut = tree.index("labextension/")
        return tree[:cut] + f"  {frag}\n" + tree[cut:]
    end = head
    while end + 1 < len(lines) and lines[end + 1].startswith("   "):
        end += 1
    last = lines[end].rstrip("\n")
    if len(last) + len(frag) + 2 <= 100:
        lines[end] = f"{last}; {frag}\n"
    else:
        lines.insert(end + 1, " " * 21 + frag + "\n")
    return "".join(lines)


def rewrite_house_tree(design: str, modules: dict[str, Path]) -> tuple[str, list[str]]:
    """The house tree from HOUSE_TREE, keeping any top-level entry of the old tree that HOUSE_TREE
    does not know (a room added since); the "Imports point down" sentence's names mapped."""
    notes = []
    start = design.index("## The house")
    a = design.index("```\n", start) + 4
    b = design.index("```", a)
    old_entries: list[list[str]] = []
    for line in design[a:b].splitlines(keepends=True):
        if re.match(r"  \S", line):
            old_entries.append([line])
        elif old_entries and line.startswith("   "):
            old_entries[-1].append(line)
    known_heads = {m.group(1) for m in re.finditer(r"^  (\S+)", HOUSE_TREE, re.MULTILINE)}
    carried = []
    for entry in old_entries:
        head = entry[0].split()[0].rstrip(",")
        if head.endswith("/") and head not in known_heads and head.rstrip("/") in modules:
            carried.append("".join(entry))
            notes.append(f"DESIGN: the tree's {head} entry carried over (HOUSE_TREE does not describe it)")
    tree = HOUSE_TREE
    old_tree = " ".join(design[a:b].split())
    for mod, path in sorted(modules.items()):
        if path.name == "__init__.py":
            continue
        name = map_module(mod).rpartition(".")[2] + ".py"
        if re.search(rf"(?<![\w.]){re.escape(name)}", tree + "".join(carried)):
            continue
        frag = name + _fragment(old_tree, path.name)[len(path.name) :]
        room = map_module(mod).rpartition(".")[0].replace(".", "/") + "/"
        tree = _append_to_entry(tree, room, frag)
        notes.append(f"DESIGN: {name} described in {room} with the old tree's words: {frag}")
    if carried:
        cut = tree.index("labextension/")
        tree = tree[:cut] + "".join(carried) + tree[cut:]
    design = design[:a] + tree + design[b:]
    m = re.search(r"\*\*Imports point down\.\*\* Bottom to top:.*?the package API and [^.]*cli\.", design, re.DOTALL)
    if not m:
        notes.append("WARNING: DESIGN's 'Imports point down. Bottom to top: ...' sentence not found: update it by hand")
        return design, notes

    def token(t: re.Match) -> str:
        name = t.group(0)
        if name not in modules or "." in name or not name:
            return name
        new = map_module(name)
        shown = new.replace(".", "/") + ("/" if (new != name and modules[name].name == "__init__.py") else "")
        if name in SENTENCE_INSERTS:
            shown += ", " + SENTENCE_INSERTS[name]
        return shown

    sentence = re.sub(r"(?<![\w/.])[a-z_]+(?![\w/]|\.\w)", token, m.group(0))
    notes.append("DESIGN: the 'Imports point down' sentence's module names mapped")
    return design[: m.start()] + sentence + design[m.end() :], notes


def unnamed_in_tree(root: Path) -> list[str]:
    design = (root / "docs" / "DESIGN.md").read_text()
    tree = design[design.index("## The house") : design.index("**Imports point down.**")]
    counts: dict[str, int] = {}
    for path in (root / PKG).rglob("*.py"):
        if path.name != "__init__.py" and "labextension" not in path.parts:
            counts[path.name] = counts.get(path.name, 0) + 1
    return sorted(n for n, k in counts.items() if len(re.findall(rf"(?<![\w.]){re.escape(n)}", tree)) < k)


# ----------------------------------------------------------------------------- main


def preflight(root: Path, modules: dict[str, Path]) -> None:
    if not (root / PKG / "__init__.py").exists():
        sys.exit(f"rooms: run from the repository root ({PKG}/ not found)")
    if (root / PKG / "inkernel" / "__init__.py").exists() or not (root / PKG / "kernel.py").exists():
        sys.exit(
            "rooms: already applied (mcp_notebook/inkernel/ exists or mcp_notebook/kernel.py is gone); nothing done"
        )
    if run("git", "status", "--porcelain", "--untracked-files=no").strip():
        sys.exit("rooms: the tree has uncommitted changes; commit or stash them first")
    root_mods = {m for m in modules if m and "." not in m and (root / PKG / f"{m}.py").exists()}
    unplaced = sorted(root_mods - KEEP_AT_ROOT - set(MOVES))
    if unplaced:
        sys.exit(f"rooms: root modules this script does not place: {unplaced}; add them to MOVES or KEEP_AT_ROOT")
    missing = sorted(m for m in list(MOVES) + list(SPLITS) if m not in modules)
    if missing:
        sys.exit(f"rooms: modules named in MOVES/SPLITS that do not exist: {missing}")
    for _src_mod, (dst, _, _) in SPLITS.items():
        if dst in modules or map_module(dst) != dst:
            sys.exit(f"rooms: split target {dst} already exists")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check and list the moves")
    ap.add_argument("--no-ruff", action="store_true", help="skip ruff (import sorting, format)")
    args = ap.parse_args()
    root = Path.cwd()
    modules = old_modules(root)
    preflight(root, modules)

    moves = sorted((p, new_path(root, p)) for p in modules.values() if new_path(root, p) != p)  # every moved .py file
    print("rooms: module moves")
    for old in sorted(MOVES):
        print(f"  mcp_notebook.{old:<22} -> mcp_notebook.{MOVES[old]}")
    for src_mod, (dst, _, names) in SPLITS.items():
        print(f"  mcp_notebook.{src_mod}: {', '.join(names)} -> mcp_notebook.{dst}")
    if args.check:
        print(f"rooms: would move {len(moves)} files; not applied (--check)")
        return

    rw = Rewriter(modules)
    tracked = [root / p for p in run("git", "ls-files").splitlines()]
    texts: dict[Path, str] = {}
    changed: dict[Path, str] = {}
    for path in tracked:
        rel = path.relative_to(root).as_posix()
        if path.suffix not in TEXT_SUFFIXES or rel.startswith(SKIP_PREFIXES) or path.is_symlink() or not path.is_file():
            continue
        try:
            src = path.read_text("utf-8")
        except UnicodeDecodeError:
            continue
        texts[path] = src
        new = rewrite_python(rw, root, path, src) if path.suffix == ".py" else rw.text(src, path.suffix == ".md")
        if new != src:
            changed[path] = new
    print(f"rooms: rewrote module paths in {len(changed)} files")

    # moves: directories that move whole first, then files
    dir_moves = sorted(m for m in MOVES if m in modules and modules[m].name == "__init__.py")
    for room in ROOMS:
        (root / PKG / room).mkdir(exist_ok=True)
    for m in dir_moves:
        src_dir, dst_dir = root / PKG / m.replace(".", "/"), root / PKG / MOVES[m].replace(".", "/")
        run("git", "mv", str(src_dir.relative_to(root)), str(dst_dir.relative_to(root)))
        print(f"  git mv {src_dir.relative_to(root)} {dst_dir.relative_to(root)}")
    for old, new in moves:
        if any(old.is_relative_to(root / PKG / m.replace(".", "/")) for m in dir_moves):
            continue
        new.parent.mkdir(parents=True, exist_ok=True)
        run("git", "mv", str(old.relative_to(root)), str(new.relative_to(root)))
        print(f"  git mv {old.relative_to(root)} {new.relative_to(root)}")

    def landed(path: Path) -> Path:
        return new_path(root, path) if module_of(root, path) is not None and path.suffix == ".py" else path

    touched_py: set[Path] = set()
    for path, text in changed.items():
        target = landed(path)
        target.write_text(text, "utf-8")
        if target.suffix == ".py":
            touched_py.add(target)
    for room, doc in ROOMS.items():
        init = root / PKG / room / "__init__.py"
        if not init.exists():
            init.write_text(f'"""{doc}"""\n', "utf-8")
            run("git", "add", str(init.relative_to(root)))
            print(f"  new {init.relative_to(root)}")

    for mod, renames in SYMBOL_RENAMES.items():
        base = mod.rsplit(".", 1)[-1]
        for path in [landed(p) for p in texts]:
            if not path.exists() or path.suffix != ".py":
                continue
            text = path.read_text("utf-8")
            if base not in text and path != root / PKG / (mod.replace(".", "/") + ".py"):
                continue
            new_text = text
            for old_name, new_name in renames.items():
                new_text = re.sub(rf"\b{old_name}\b", new_name, new_text)
            if new_text != text:
                path.write_text(new_text, "utf-8")
                if path.suffix == ".py":
                    touched_py.add(path)
                print(f"  {path.relative_to(root)}: {', '.join(f'{a} -> {b}' for a, b in renames.items())}")

    split_files = set()
    for src_mod, (dst, doc, names) in SPLITS.items():
        src_path = root / PKG / (map_module(src_mod).replace(".", "/") + ".py")
        dst_path = root / PKG / (dst.replace(".", "/") + ".py")
        stay, new_src = split_module(src_path.read_text(), names, dst.rsplit(".", 1)[-1], doc)
        src_path.write_text(stay, "utf-8")
        dst_path.write_text(new_src, "utf-8")
        run("git", "add", str(dst_path.relative_to(root)))
        split_files |= {src_path, dst_path}
        touched_py |= {src_path, dst_path}
        print(f"  split {src_path.relative_to(root)}: {len(names)} definitions -> {dst_path.relative_to(root)}")

    house = root / "tests" / "test_house.py"
    if house.exists():
        text, notes = rewrite_layers(house.read_text(), modules)
        house.write_text(text, "utf-8")
        touched_py.add(house)
        for n in notes:
            print("  " + n)
    design = root / "docs" / "DESIGN.md"
    if design.exists():
        text, notes = rewrite_house_tree(design.read_text(), modules)
        design.write_text(text, "utf-8")
        print("  docs/DESIGN.md: the house tree regenerated from the template")
        for n in notes:
            print("  " + n)
        unnamed = unnamed_in_tree(root)
        if unnamed:
            print(f"rooms: WARNING: modules not named in DESIGN's house tree (add them to HOUSE_TREE): {unnamed}")

    ruff = root / ".venv" / "bin" / "ruff"
    ruff_cmd = str(ruff) if ruff.exists() else shutil.which("ruff")
    if not args.no_ruff and ruff_cmd:
        files = sorted(str(p.relative_to(root)) for p in touched_py if p.exists())
        run(
            ruff_cmd,
            "check",
            "--fix",
            "--select",
            "F401",
            *[str(p.relative_to(root)) for p in split_files],
            check=False,
        )
        run(ruff_cmd, "check", "--fix", "--select", "I", *files, check=False)
        run(ruff_cmd, "format", *files, check=False)
        print(f"rooms: ruff sorted imports and formatted {len(files)} Python files")
    elif not args.no_ruff:
        print("rooms: WARNING: ruff not found; run ruff check --fix --select I and ruff format yourself")
    leftovers = run(
        "git", "grep", "-n", "-E", r"mcp_notebook\.(kernel|frontend_comm|hub_selection|kernels)\b", check=False
    )
    if leftovers.strip():
        print("rooms: old module paths still named (check by hand):\n" + leftovers)
    print("rooms: done; review with git status / git diff --stat -M, then run the house test")


if __name__ == "__main__":
    main()
