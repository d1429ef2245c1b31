"""The official MCP conformance suite (@modelcontextprotocol/conformance) against a hub in a real kernel.

Three runs: 0.1.16's default server suite, 0.2.0-alpha.12 with ``--requirements 2026-07-28``
(stateless wire) and 0.2.0-alpha.12's default run (2025-11-25 wire, with server-session-lifecycle).
Each must exit 0 against its expected-failures file in tests/conformance/, which lists only what a
resources-only server cannot pass (tools, prompts, sampling, elicitation, input-required fixtures).
The suite cannot send headers, so tests/conformance/bearer-preload.mjs adds the hub's bearer token.

Node tooling comes from tests/node (``npm ci`` there); MCP_NODE_BIN_DIR overrides the .bin directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import Kernel

HERE = Path(__file__).parent
ROOT = HERE.parent
NODE_DIR = HERE / "node"
CONFORMANCE = HERE / "conformance"
REPORT_DIR = ROOT / ".ci-work" / "conformance"
RUN_TIMEOUT = 600  # seconds per suite run; a full run takes well under a minute

# name -> (npm alias of the suite, extra CLI flags, expected-failures file)
RUNS: dict[str, tuple[str, list[str], str]] = {
    "stable-0.1.16": ("conformance-stable", [], "expected-failures-stable.yml"),
    "alpha-2026-07-28": ("conformance-alpha", ["--requirements", "2026-07-28"], "expected-failures-alpha-2026.yml"),
    "alpha-default": ("conformance-alpha", [], "expected-failures-alpha.yml"),
}
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def node_bin_dir() -> Path:
    return Path(os.environ.get("MCP_NODE_BIN_DIR", NODE_DIR / "node_modules" / ".bin"))


def suite_script(alias: str) -> Path:
    """The suite's entry point: a sibling node_modules of the .bin directory."""
    return node_bin_dir().parent / alias / "dist" / "index.js"


@pytest.fixture(scope="module")
def node() -> Path:
    """Node 22 from tests/node; a missing install is a failure, not a skip (CI installs it)."""
    binary = node_bin_dir() / "node"
    needed = dict.fromkeys([binary, *(suite_script(alias) for alias, _, _ in RUNS.values())])
    missing = [p for p in needed if not p.exists()]
    if missing:
        pytest.fail(
            f"Node tooling for the conformance suite is missing ({', '.join(map(str, missing))}). "
            f"Install it with: (cd {NODE_DIR} && npm ci)   [or set MCP_NODE_BIN_DIR to a node_modules/.bin "
            "holding node 22 next to the conformance-stable and conformance-alpha packages]",
            pytrace=False,
        )
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    assert version.startswith("v22."), f"{binary} is {version}, expected Node 22"
    return binary


@dataclass(frozen=True)
class Target:
    """The hub under test; the token stays out of repr (pytest prints test arguments on failure)."""

    url: str
    token: str = field(repr=False)


@pytest.fixture(scope="module")
def target(kernel: Kernel, hub: dict[str, Any]) -> Target:
    """The hub with the suite's fixture resources registered through the public API."""
    kernel.run((CONFORMANCE / "fixtures.py").read_text())
    read = kernel.run("import mcp_notebook as _m; print(sorted(r.uri for r in _m.hub().resources.list_resources()))")
    assert "test://static-text" in read.stdout, read.stdout
    url = hub["url"].replace("//localhost:", "//127.0.0.1:")
    assert url.startswith("http://127.0.0.1:"), url
    return Target(url, hub["token"] or "")


def scenario_of(run_dir: Path) -> str:
    """``server-<scenario>-<ISO timestamp>`` -> ``<scenario>``."""
    return _STAMP.sub("", run_dir.name).removeprefix("server-")


def expected_entries(path: Path) -> set[str]:
    """The ``server:`` entries of an expected-failures file (flat list, one per line)."""
    entries: set[str] = set()
    section = None
    for line in path.read_text().splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped:
            continue
        if not line.startswith((" ", "-")):
            section = stripped.rstrip(":").strip()
            continue
        if section == "server" and stripped.lstrip().startswith("- "):
            entries.add(stripped.lstrip()[2:].strip().strip("\"'"))
    return entries


def scored_scenarios(node: Path, alias: str, flags: list[str]) -> set[str] | None:
    """Server scenarios that count toward the exit code of a ``--requirements`` run (None: all do)."""
    if "--requirements" not in flags:
        return None
    release = flags[flags.index("--requirements") + 1]
    listing = subprocess.run(
        [str(node), str(suite_script(alias)), "list", "--requirements", release],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert listing.returncode == 0, listing.stderr
    scored: set[str] = set()
    in_server = False
    for line in listing.stdout.splitlines():
        if line.strip().startswith(("Server scenarios", "Client scenarios", "Run and reported")):
            in_server = line.strip().startswith("Server scenarios")
        elif in_server and line.startswith("  - "):
            scored.add(line[4:].strip())
    assert scored, listing.stdout
    return scored


def tabulate(out_dir: Path, expected: set[str], scored: set[str] | None = None) -> dict[str, dict[str, int]]:
    """scenario -> {passed, failed, expected, other, scored} counts of its checks.json."""
    table: dict[str, dict[str, int]] = {}
    for checks_file in sorted(out_dir.glob("server-*/checks.json")):
        scenario = scenario_of(checks_file.parent)
        counts = Counter({"passed": 0, "failed": 0, "expected": 0, "other": 0})
        for check in json.loads(checks_file.read_text()):
            status = check.get("status")
            if status == "SUCCESS":
                counts["passed"] += 1
            elif status in ("FAILURE", "WARNING"):
                listed = scenario in expected or f"{scenario}:{check.get('id')}" in expected
                counts["expected" if listed else "failed"] += 1
            else:  # INFO, SKIPPED
                counts["other"] += 1
        table[scenario] = {**counts, "scored": int(scored is None or scenario in scored)}
    return table


def render(name: str, table: dict[str, dict[str, int]]) -> str:
    width = max([len(s) for s in table] + [8])
    lines = [f"conformance {name}: checks per scenario", f"{'scenario':<{width}}  pass  fail  xfail  info"]
    for scenario, c in table.items():
        note = "" if c["scored"] else "  (not scored)"
        lines.append(
            f"{scenario:<{width}}  {c['passed']:>4}  {c['failed']:>4}  {c['expected']:>5}  {c['other']:>4}{note}"
        )
    total: Counter[str] = Counter()
    for c in table.values():
        if c["scored"]:
            total.update(c)
    scored = [c for c in table.values() if c["scored"]]
    clean = sum(1 for c in scored if c["passed"] and not c["failed"] and not c["expected"])
    lines.append(
        f"{'TOTAL':<{width}}  {total['passed']:>4}  {total['failed']:>4}  {total['expected']:>5}  {total['other']:>4}"
        f"   (scored scenarios only; {clean}/{len(scored)} fully passing)"
    )
    return "\n".join(lines)


def report(name: str, table: dict[str, dict[str, int]], returncode: int) -> str:
    text = render(name, table)
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    (REPORT_DIR / f"{name}.json").write_text(
        json.dumps({"run": name, "exit": returncode, "scenarios": table}, indent=1)
    )
    rows = [
        f"| {s} | {c['passed']} | {c['failed']} | {c['expected']} | {c['other']} | {'yes' if c['scored'] else 'no'} |"
        for s, c in table.items()
    ]
    md = [
        f"## {name} (exit {returncode})",
        "",
        "| scenario | pass | fail | expected | info | scored |",
        "|---|---|---|---|---|---|",
    ]
    (REPORT_DIR / f"{name}.md").write_text("\n".join([*md, *rows, ""]))
    return text


@pytest.mark.timeout(RUN_TIMEOUT + 120)
@pytest.mark.parametrize("name", list(RUNS))
def test_conformance_suite(name: str, node: Path, target: Target, tmp_path: Path) -> None:
    alias, flags, baseline = RUNS[name]
    baseline_file = CONFORMANCE / baseline
    out_dir = tmp_path / "out"
    cmd = [
        str(node),
        "--import",
        (CONFORMANCE / "bearer-preload.mjs").as_uri(),
        str(suite_script(alias)),
        "server",
        "--url",
        target.url,
        *flags,
        "--expected-failures",
        str(baseline_file),
        "-o",
        str(out_dir),
    ]
    base_env = {k: v for k, v in os.environ.items() if k != "NODE_OPTIONS"}
    proc = subprocess.run(
        cmd,
        env={**base_env, "MCP_BEARER": target.token, "NO_COLOR": "1", "FORCE_COLOR": "0"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    output = proc.stdout + proc.stderr
    if target.token:
        output = output.replace(target.token, "<token>")
    exit_code = proc.returncode
    del proc  # its repr holds the raw output; only the redacted copy may reach a failure message
    table = tabulate(out_dir, expected_entries(baseline_file), scored_scenarios(node, alias, flags))
    print("\n" + report(name, table, exit_code))
    assert table, f"the suite wrote no checks.json under {out_dir}:\n{output[-4000:]}"
    assert exit_code == 0, f"conformance {name} exited {exit_code}:\n{output[-8000:]}"
    unexpected = {s: c["failed"] for s, c in table.items() if c["failed"] and c["scored"]}
    assert not unexpected, f"unexpected failing checks {unexpected}:\n{output[-8000:]}"
    for must_pass in ("resources-list", "resources-read-text", "resources-read-binary", "resources-templates-read"):
        assert table.get(must_pass, {}).get("passed"), f"{must_pass} did not pass: {table.get(must_pass)}"
