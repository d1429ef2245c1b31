"""The shape of the house (docs/DESIGN.md, "The house"): imports point down, no circles, and no
module or function grows past what a reader takes in at once.

Every import counts, also those inside functions and under ``if TYPE_CHECKING``: a lazy import
is still an arrow a reader must follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_notebook"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60

# Bottom to top. A module may import modules of its own layer or below, never above.
LAYERS: list[tuple[str, ...]] = [
    ("version", "redact", "uri", "runtime", "capture", "clients_config", "kernel_launch", "revisions"),
    ("render", "config", "autoload"),
    ("logs", "types"),
    ("providers",),
    ("resources",),
    ("protocol.jsonrpc",),
    ("protocol.params", "protocol.cursors", "protocol.streams", "protocol.security", "protocol.eras", "protocol.apps"),
    ("protocol.exchange",),
    ("protocol.tool_watch",),
    ("protocol.tool_spec",),
    ("protocol.view_tools",),
    ("protocol.tools",),
    ("protocol.core",),
    ("protocol.handshake", "protocol.stateless"),
    ("protocol.fast_read",),
    ("protocol.server", "protocol"),
    ("transport.http11", "transport.busy_poll", "transport.loop", "transport.client"),
    ("transport.heads",),
    ("transport.connection", "transport.control"),
    ("transport.server", "transport"),
    ("activity", "kernel", "kernels"),
    ("lifecycle",),
    ("magics", "frontend_comm", "widgets"),
    ("channel", "hub_selection", "stdio_input"),
    ("bridge", "remote", "demo", "serverext", "doctor"),
    ("", "cli", "__main__"),  # "": the package itself (the public API)
]

# Functions allowed past MAX_FUNCTION_LINES, each with its reason in docs/DESIGN.md ("The house").
LONG_FUNCTIONS: dict[str, str] = {}


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
