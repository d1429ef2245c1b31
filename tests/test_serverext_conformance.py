"""Node MCP peers through the Jupyter server extension, knowing only the server URL and its token.

The official conformance suite passes with the same expected failures as against the hub itself,
the Jupyter token as the bearer (tests/test_conformance.py has the machinery; its alpha suite runs
in both wires against ``{server}/mcp-notebook/kernels/<id>/mcp``); the MCP Inspector CLI lists and
reads over HTTP with ``Authorization: token …`` and through ``mcp-notebook bridge --server``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jserver import JupyterServer, load_hub, run
from test_conformance import (
    CONFORMANCE,
    RUN_TIMEOUT,
    RUNS,
    expected_entries,
    node,  # noqa: F401 - the fixture
    render,
    scored_scenarios,
    suite_script,
    tabulate,
)
from test_inspector import inspector

TOKEN = "conformance-jupyter-token"


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, str]]:
    """A server and one of its kernels with a hub and the suite's fixture resources."""
    server = JupyterServer(tmp_path_factory.mktemp("jserver-conformance"), token=TOKEN)
    try:
        kid = server.start_kernel()
        kc = server.client(kid)
        load_hub(kc)
        run(kc, (CONFORMANCE / "fixtures.py").read_text() + "\ninspected_remote = [10, 20, 30]")
        yield server, kid
    finally:
        server.stop()


@pytest.fixture(scope="module")
def proxied(jupyter: tuple[JupyterServer, str]) -> str:
    server, kid = jupyter
    return server.mcp_url(kid)


@pytest.mark.parametrize("via", ["http", "bridge"])
def test_inspector_through_jupyter_server(jupyter: tuple[JupyterServer, str], via: str) -> None:
    server, kid = jupyter
    if via == "http":
        where = [server.mcp_url(kid), "--header", f"Authorization: token {TOKEN}"]
    else:
        bridge = [sys.executable, "-m", "mcp_notebook.commands.cli", "bridge", "--server", server.url, "--kernel", kid]
        where = ["-e", f"MCP_NOTEBOOK_SERVER_TOKEN={TOKEN}", "--", *bridge]
    listed = inspector("--method", "resources/list", *where)
    assert "nb://vars/inspected_remote" in {r["uri"] for r in listed["resources"]}
    read = inspector("--method", "resources/read", "--uri", "nb://vars/inspected_remote", *where)
    assert json.loads(read["contents"][0]["text"])["repr"] == "[10, 20, 30]"


@pytest.mark.timeout(RUN_TIMEOUT + 120)
@pytest.mark.parametrize("name", ["alpha-default", "alpha-2026-07-28"])
def test_conformance_through_jupyter_server(name: str, node: Path, proxied: str, tmp_path: Path) -> None:  # noqa: F811
    alias, flags, baseline = RUNS[name]
    baseline_file = CONFORMANCE / baseline
    out_dir = tmp_path / "out"
    cmd = [str(node), "--import", (CONFORMANCE / "bearer-preload.mjs").as_uri(), str(suite_script(alias))]
    cmd += ["server", "--url", proxied, *flags, "--expected-failures", str(baseline_file), "-o", str(out_dir)]
    env = {k: v for k, v in os.environ.items() if k != "NODE_OPTIONS"}
    proc = subprocess.run(
        cmd,
        env={**env, "MCP_BEARER": TOKEN, "NO_COLOR": "1", "FORCE_COLOR": "0"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    output = (proc.stdout + proc.stderr)[-8000:]
    table = tabulate(out_dir, expected_entries(baseline_file), scored_scenarios(node, alias, flags))
    print("\n" + render(f"{name} through jupyter server", table))
    assert table, output
    assert proc.returncode == 0, output
    unexpected = {s: c["failed"] for s, c in table.items() if c["failed"] and c["scored"]}
    assert not unexpected, f"unexpected failing checks {unexpected}:\n{output}"
    for must_pass in ("resources-list", "resources-read-text", "resources-read-binary", "resources-templates-read"):
        assert table.get(must_pass, {}).get("passed"), f"{must_pass} did not pass: {table.get(must_pass)}"
    if name == "alpha-default":
        for must_pass in ("server-session-lifecycle", "resources-subscribe", "dns-rebinding-protection"):
            assert table.get(must_pass, {}).get("passed"), f"{must_pass} did not pass: {table.get(must_pass)}"
