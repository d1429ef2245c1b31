"""The shape of the house (docs/DESIGN.md, "The house"): imports point down, no circles, and no
module or function grows past what a reader takes in at once.

Every import counts, also those inside functions and under ``if TYPE_CHECKING``: a lazy import
is still an arrow a reader must follow.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_notebook"
BENCH = PACKAGE.parent / "bench"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
# A class is read as a whole (its state and every method touching it): 450 lines is what the largest
# ones need today (the HTTP connection, the variables provider, the bridge, the cell capture, each
# 420-450) and stops them growing; going lower means splitting those, scheduled with the rooms.
MAX_CLASS_LINES = 450
# bench/ scripts are recipes read top to bottom (set up, measure, print): a measure keeps its steps
# in one place so a figure is traced to one function. Looser than the package, and still a bound.
BENCH_MAX_MODULE_LINES = 650
BENCH_MAX_FUNCTION_LINES = 90

# Bottom to top. A module may import modules of its own layer or below, never above.
LAYERS: list[tuple[str, ...]] = [
    (
        "version",
        "heap",
        "hop_trace",
        "instructions",
        "portable",
        "lazy_re",
        "redact",
        "uri",
        "runtime",
        "cell_streams",
        "capture",
        "commands.clients_config",
        "commands.clients_toml",
        "commands.kernel_launch",
        "revisions",
        "budget",
        "figures",
        "figures.summary",
        "figures.mpl_boxes",
    ),
    ("inkernel.config", "commands.autoload", "guard", "figures.mpl", "figures.bundle"),
    ("figures.live",),
    ("logs", "types"),
    (
        "providers",
        "postcell",
    ),
    ("resources",),
    ("protocol.wire_stateless", "protocol.wire_sse", "protocol.wire_http11"),
    # The one client of a hub: its rules, then its two faces (both ends of a wire sit below it).
    ("hubclient.rules",),
    ("hubclient.aio", "hubclient.blocking", "hubclient.address", "hubclient"),
    ("protocol.jsonrpc",),
    ("protocol.cursors", "protocol.streams", "protocol.security", "protocol.apps"),
    ("protocol.exchange",),
    ("protocol.tool_watch",),
    ("protocol.tool_spec",),
    ("protocol.tools",),
    ("protocol.core",),
    ("protocol.handshake", "protocol.stateless"),
    ("protocol.fast_read",),
    ("protocol.families",),
    ("protocol.server", "protocol"),
    # The tools over the nb:// resources (the Apps views' tools, the notebook's words for the generic
    # ones): registered where a server is composed; above the protocol room, which cannot import them.
    ("nb_tools",),
    ("transport.control_wire",),
    ("transport.latency", "transport.loop", "transport.driver", "transport.http11_state", "transport.libc_socket"),
    ("transport.connection", "transport.control", "transport.held_stream"),
    ("transport.server", "transport"),
    ("inkernel.activity", "inkernel.kernel_hub", "allkernels"),
    ("inkernel.lifecycle",),
    ("inkernel.lab_target",),
    ("inkernel.magics", "inkernel.lab_comm", "widgets", "inkernel"),
    ("bridge.claude_push", "bridge.hub_selection", "bridge.stdio_input", "bridge.stdio_carrier", "bridge.http_link"),
    ("serverside",),  # kernels without a hub, served from the Jupyter server's side (issue #43)
    ("bridge.stdio", "bridge.remote", "commands.demo", "serverext", "commands.doctor", "jupyterhub_service", "bridge"),
    # "": the package itself (the public API); hubservice: the deprecated name of jupyterhub_service
    ("", "commands.cli", "commands.changes", "__main__", "commands", "hubservice"),
]

# Functions allowed past MAX_FUNCTION_LINES, each with its reason in docs/DESIGN.md ("The house").
LONG_FUNCTIONS: dict[str, str] = {}

# bench/ bottom to top: the package and tests/ helpers are below all of it; a script may import
# scripts of its own layer or below. The package never imports bench/.
BENCH_LAYERS: list[tuple[str, ...]] = [
    ("bare", "refservers", "loadgen", "kside", "abuse", "notify", "plot", "quiet", "figures", "speed_cell"),
    ("sections", "remote", "headline", "speed_reader"),
    (
        "busy",
        "cellspeed",
        "cellfirst",
        "engines",
        "scaling",
        "varied",
        "apps",
        "kernels",
        "serverside",
        "typed",
        "probe",
        "fuzz",
        "request_cost",
        "trace_read",
        "gateway",
        "load",
        "jupyterhub_service",
        "jupyterhub_paced",
        "jupyterhub_burst",
        "bridge_latency",
        "http_codec",
        "hook",
        "hook_parts",
        "switch_cost",
        "request_ab",
    ),
    ("run",),
    ("notify_client", "notify_hops"),  # the notification bench's helpers (issue #42, sixth pass)
]
LONG_BENCH_FUNCTIONS: dict[str, str] = {
    "run.render": "the README's figure table, one row per measured case in the order the README shows them",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(module: str) -> int:
    best, rank = -1, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            matches = module == name or (name and module.startswith(name + "."))
            if matches and len(name) > best:
                best, rank = len(name), i
    assert rank >= 0, f"mcp_notebook.{module} has no layer in tests/test_house.py: give it one"
    return rank


def _imports(module: str, path: Path) -> set[str]:
    """The package modules ``module`` imports (relative names, "" for the package itself)."""
    out: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.split(".")[0] == "mcp_notebook"]
            targets = [t.removeprefix("mcp_notebook").lstrip(".") for t in targets]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if module else []
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == "mcp_notebook":
                name = (node.module or "").removeprefix("mcp_notebook").lstrip(".")
            else:
                continue
            targets = [f"{name}.{a.name}".lstrip(".") for a in node.names]
            targets = [t if t in MODULES else name for t in targets]
        for target in targets:
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in MODULES and target != module:
                out.add(target)
    return out


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def test_imports_point_down():
    upward = [
        f"mcp_notebook.{m or '__init__'} -> mcp_notebook.{t or '__init__'}"
        for m, targets in GRAPH.items()
        for t in targets
        if _layer(t) > _layer(m)
    ]
    assert upward == []


def test_no_import_circles():
    seen: dict[str, int] = {}  # 1: on the current path, 2: done
    circles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        seen[module] = 1
        for target in sorted(GRAPH[module]):
            if seen.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in seen:
                visit(target, [*path, target])
        seen[module] = 2

    for module in sorted(GRAPH):
        if module not in seen:
            visit(module, [module])
    assert circles == []


def test_modules_stay_readable():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_functions_stay_readable():
    long = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                key = f"{module}.{node.name}"
                if lines > MAX_FUNCTION_LINES and key not in LONG_FUNCTIONS:
                    long[key] = lines
    assert long == {}


def test_the_layer_table_names_only_real_modules():
    for names in LAYERS:
        for name in names:
            assert name == "" or any(m == name or m.startswith(name + ".") for m in MODULES), name


# What only the protocol knows: MCP's header names (the product's own "mcp-notebook" names are not
# MCP words), JSON-RPC, method names, request ids, _meta. transport/ carries bytes and calls the
# server's carrier interface (protocol/server.py); it never reads or writes these.
MCP_WORDS = re.compile(
    r"""mcp-(?!notebook)|jsonrpc|json-rpc|resources/|server/discover|initialize|["']id["']|_meta|protocolversion""",
    re.IGNORECASE,
)


def test_transport_knows_no_mcp_word():
    leaks = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in sorted((PACKAGE / "transport").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if MCP_WORDS.search(line)
    ]
    assert leaks == []


def test_the_mcp_word_check_sees_a_leak():
    for leak in ('fields["mcp-name"] = uri', "b'\"jsonrpc\"'", "if b'\"id\"' in body:", "# resources/read"):
        assert MCP_WORDS.search(leak), leak
    assert not MCP_WORDS.search('name="mcp-notebook-http"')


# The kernel's domain (its nb:// URIs, the providers that serve them) stays out of the protocol room:
# the tools that name or read those URIs (nb_tools.py) are registered where a server is
# composed. Generic URI schemes (ui://, the Apps views' scheme) are protocol words.
DOMAIN_URI = re.compile(r"nb://")


def test_protocol_knows_no_kernel_uri():
    leaks = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in sorted((PACKAGE / "protocol").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if DOMAIN_URI.search(line)
    ]
    assert leaks == []
    into_nb_tools = sorted(m for m, targets in GRAPH.items() if m.startswith("protocol") and "nb_tools" in targets)
    assert into_nb_tools == []


def test_every_module_is_named_in_designs_house_tree():
    """docs/DESIGN.md's house tree names every module (a name two modules share, as often)."""
    design = (PACKAGE.parent / "docs" / "DESIGN.md").read_text()
    tree = design[design.index("## The house") : design.index("**Imports point down.**")]
    names: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            names[path.name] = names.get(path.name, 0) + 1
    unnamed = {n: k for n, k in names.items() if len(re.findall(rf"(?<![\w.]){re.escape(n)}", tree)) < k}
    assert unnamed == {}


def test_classes_stay_readable():
    long = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ClassDef)
                and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_CLASS_LINES
            ):
                long[f"{module}.{node.name}"] = n
    assert long == {}


BENCH_MODULES = {p.stem: p for p in BENCH.glob("*.py")}


def _bench_layer(name: str) -> int:
    for i, names in enumerate(BENCH_LAYERS):
        if name in names:
            return i
    raise AssertionError(f"bench/{name}.py has no layer in tests/test_house.py BENCH_LAYERS: give it one")


def _bench_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out & set(BENCH_MODULES)


def test_bench_imports_point_down_and_the_package_never_imports_bench():
    assert [n for names in BENCH_LAYERS for n in names if n not in BENCH_MODULES] == []
    upward = [
        f"bench/{m}.py -> bench/{t}.py"
        for m, path in BENCH_MODULES.items()
        for t in _bench_imports(path)
        if _bench_layer(t) > _bench_layer(m)
    ]
    assert upward == []
    circles = [
        (m, t) for m, p in BENCH_MODULES.items() for t in _bench_imports(p) if m in _bench_imports(BENCH_MODULES[t])
    ]
    assert circles == []  # (within a layer: two scripts importing each other)
    into_bench = [m for m, path in MODULES.items() if _bench_imports(path) or "bench" in _absolute_roots(path)]
    assert into_bench == []


def _absolute_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return roots | {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level
    }


def test_bench_stays_readable():
    long = {}
    for name, path in BENCH_MODULES.items():
        text = path.read_text()
        if (n := len(text.splitlines())) > BENCH_MAX_MODULE_LINES:
            long[f"bench/{name}.py"] = n
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                key = f"{name}.{node.name}"
                if lines > BENCH_MAX_FUNCTION_LINES and key not in LONG_BENCH_FUNCTIONS:
                    long[key] = lines
    assert long == {}


def test_no_class_name_is_defined_twice():
    """One name, one thing: a reader who meets a class name finds one definition in the package."""
    where: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(module)
    twice = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert twice == {}


def _room(module: str, depth: int) -> str:
    """The room (folder) of ``module`` at ``depth`` folders (1: mcp_notebook/providers, 2:
    mcp_notebook/providers/frames); a module outside any folder is a room of its own."""
    parts = module.split(".")
    folders = parts if module in PACKAGES else parts[:-1]
    return ".".join(folders[:depth]) if folders else module


PACKAGES = {m for m, p in MODULES.items() if p.name == "__init__.py"}


def _room_circles(depth: int, within: str = "") -> list[list[str]]:
    edges: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        if within and not module.startswith(within + "."):
            continue
        room = _room(module, depth)
        for target in targets:
            if within and not target.startswith(within + "."):
                continue
            other = _room(target, depth)
            if other != room:
                edges.setdefault(room, set()).add(other)
    circles: list[list[str]] = []
    seen: dict[str, int] = {}

    def visit(room: str, path: list[str]) -> None:
        seen[room] = 1
        for other in sorted(edges.get(room, ())):
            if seen.get(other) == 1:
                circles.append([*path[path.index(other) :], other])
            elif other not in seen:
                visit(other, [*path, other])
        seen[room] = 2

    for room in sorted(edges):
        if room not in seen:
            visit(room, [room])
    return circles


def test_rooms_import_each_other_without_circles():
    """Folders in layers too: no two rooms of the package (nor two sub-rooms of providers/) import
    each other, directly or round a longer circle."""
    assert _room_circles(1) == []
    assert _room_circles(2, within="providers") == []


def test_the_room_check_sees_a_circle():
    assert _room("providers.frames.pages", 2) == "providers.frames"
    assert _room("providers.variables", 2) == "providers"
    assert _room("resources", 1) == "resources"
