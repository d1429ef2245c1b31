"""The largest serialized result of each kind of read and tool (issue #35), in characters.

    PYTHONPATH=. .venv/bin/python bench/budget.py

A real kernel holds the values of tests/test_budget.py (big and wide frames, strings that escaping
expands, a megabyte of output, long tracebacks, a 300-cell notebook, 1,300 names rebound at once);
each is read through resources/read and the tools (stateless era, with and without MCP Apps) and
the compact JSON of each `result` is measured. Prints one JSON object {kind: characters}. Sizes,
not timings: they do not depend on the machine. Run it with PYTHONPATH pointing at another tree to
compare (the before → after figures in docs/DESIGN.md, "Within every host's budget").
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import test_budget as tb
from kernel_harness import Kernel
from test_apps_protocol import Wire


def measure(kernel: Kernel, info: dict, out: dict[str, int]) -> None:
    """Read every kind in both client kinds; the largest result per kind goes into ``out``."""

    def note(kind: str, reply: dict) -> None:
        out[kind] = max(out.get(kind, 0), tb.wire(reply.get("result", reply.get("error"))))

    seqs = {"output": 3, "deep": 4, "raise": 5}
    for apps in (False, True):
        w = Wire(info, "stateless", apps)
        tag = "apps" if apps else "plain"
        for uri in tb.reads(seqs):
            kind = uri.split("?")[0]
            for n in ("3", "4", "5"):
                kind = kind.replace(f"/{n}/", "/N/")
            note(f"read {kind}", w.call("resources/read", {"uri": uri}))
            tool = w.call("tools/call", {"name": "read_resource", "arguments": {"uri": uri}})
            note(f"read_resource[{tag}] {kind}", tool)
        note(f"list_resources[{tag}]", w.call("tools/call", {"name": "list_resources", "arguments": {}}))
        if apps:
            for name, args in [("explore_frame", {"name": "wide_df"}), ("show_outputs", {"cell": 3})]:
                note(f"{name} {args}", w.call("tools/call", {"name": name, "arguments": args}))
        start = w.call("tools/call", {"name": "changes_since", "arguments": {"wait_seconds": 0}})["result"]
        cursor = start["structuredContent"]["cursor"] if apps else json.loads(start["content"][0]["text"])["cursor"]
        kernel.run(f"for _i in range(1200):\n    globals()[f'v{{_i}}'] = '{tag}' + str(_i)")
        args = {"cursor": cursor, "wait_seconds": 5}
        note(f"changes_since[{tag}] 1,200 rebinds", w.call("tools/call", {"name": "changes_since", "arguments": args}))
        note("resources/list first page", w.call("resources/list", {}))
        note("error: read app://bad", w.call("resources/read", {"uri": "app://bad"}))


def main() -> None:
    runtime = Path(tempfile.mkdtemp())
    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
    out: dict[str, int] = {}
    try:
        notebook = runtime / "big.ipynb"
        tb.make_notebook(notebook)
        info = kernel.load_hub(f"%config MCPHub.notebook_path = {str(notebook)!r}")
        kernel.run(tb.SETUP)
        kernel.run("print(TRICKY * 70000)")
        kernel.run("def deep(n):\n    return deep(n - 1) if n else 1 / 0\ndeep(900)", check=False)
        kernel.run("raise ValueError('long ' + TRICKY * 20000)", check=False)
        measure(kernel, info, out)
    finally:
        kernel.shutdown()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
