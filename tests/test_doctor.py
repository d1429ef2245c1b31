"""`mcp-notebook doctor` in the test environment (everything installed): a running hub shows up with
its URL, every frame kind is ready, both Jupyter extensions are enabled, and no token is printed.
The profiles of tests/test_install_profiles.py run it where parts are missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kernel_harness import Kernel

DOCTOR = [str(Path(sys.executable).parent / "mcp-notebook"), "doctor"]


def test_doctor_reports_a_running_hub_and_the_extensions(tmp_path):
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)}
    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        info = kernel.load_hub()
        out = subprocess.run([*DOCTOR, "--json"], capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert [h["url"] for h in doc["hubs"] if h["alive"]] == [info["url"]]
        assert all(k["ready"] for k in doc["kinds"]), doc["kinds"]
        assert doc["jupyter"]["labextension_enabled"] and doc["jupyter"]["server_extension_enabled"]
        text = subprocess.run(DOCTOR, capture_output=True, text=True, env=env, timeout=60).stdout
        assert f"running {info['url']}" in text.replace("  ", " ") or info["url"] in text
        assert info["token"] not in out.stdout + text
    finally:
        kernel.shutdown()
