"""Throwaway PostgreSQL and haproxy on 127.0.0.1 for the replicated JupyterHub service: a cluster
made with Debian's initdb/pg_ctl in a temp dir (as the ``postgres`` user when run as root: initdb
refuses root), and haproxy balancing two service replicas round-robin, every request on its own (no stickiness:
handshake-era sessions are shared through the store). Each reply names the replica that gave it
in ``X-Replica`` (a test-only header). Every wait is bounded."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from jserver import free_port


def pg_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(versions[-1]).parent if versions else None


def missing() -> str | None:
    """Why the replica tests cannot run here (None: they can)."""
    if pg_bin() is None:
        return "PostgreSQL is not installed (Debian: apt-get install postgresql; scripts/test.sh does)"
    if shutil.which("haproxy") is None:
        return "haproxy is not installed (Debian: apt-get install haproxy; scripts/test.sh does)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: initdb cannot run"
    return None


def _wait_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing listens on {port}")


class Postgres:
    """A PostgreSQL cluster in ``base`` (trust authentication, 127.0.0.1 only), one database."""

    def __init__(self, base: Path, database: str = "mcpnb"):
        self.dir, self.port, self.bin = base / "pg", free_port(), pg_bin()
        self.dir.mkdir(parents=True)
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(base, "postgres")
            shutil.chown(self.dir, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.dir), "-U", "mcp", "--auth=trust", "-E", "UTF8")
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off"
        self._run("pg_ctl", "-D", str(self.dir), "-o", options, "-l", str(self.dir / "log"), "-w", "-t", "60", "start")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "mcp", database)
        self.url = f"postgresql://mcp@127.0.0.1:{self.port}/{database}"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self.as_user, str(self.bin / tool), *args], check=True, capture_output=True, timeout=120)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.dir), "-m", "immediate", "-w", "-t", "30", "stop")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass


HAPROXY = """
global
  maxconn 512
defaults
  mode http
  timeout connect 2s
  timeout client 300s
  timeout server 300s
  retries 3
  option redispatch
  option http-server-close
  option http-no-delay
frontend service
  bind 127.0.0.1:{port}
  default_backend replicas
backend replicas
  balance roundrobin
  http-response set-header X-Replica %[srv_name]
  option httpchk GET /services/mcp-notebook/.well-known/oauth-protected-resource
{servers}
"""


class Haproxy:
    """haproxy in front of the replicas' ports, round-robin per request."""

    def __init__(self, base: Path, ports: list[int]):
        self.port = free_port()
        servers = "\n".join(f"  server r{i} 127.0.0.1:{p} check inter 300 fall 1 rise 1" for i, p in enumerate(ports))
        self.conf = base / "haproxy.cfg"
        self.conf.write_text(HAPROXY.format(port=self.port, servers=servers))
        self.log = open(base / "haproxy.log", "wb")  # closed in stop()
        self.proc = subprocess.Popen(
            ["haproxy", "-db", "-f", str(self.conf)], stdout=self.log, stderr=subprocess.STDOUT
        )
        _wait_port(self.port)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Replica:
    """One process of the service, given the environment JupyterHub gives a managed service."""

    def __init__(self, base: Path, name: str, port: int, env: dict[str, str], args: list[str]):
        self.port, self.name = port, name
        self.log_path = base / f"{name}.log"
        self.log = open(self.log_path, "wb")  # closed in stop()
        full = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
        full |= env | {"JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_notebook.jupyterhub_service", *args],
            cwd=str(base),
            env=full,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait(self) -> None:
        _wait_port(self.port, 60)

    def kill(self) -> None:
        """The process dies at once (SIGKILL: nothing is flushed, nothing said to clients)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")


def service_env(public: str, api_url: str, token: str) -> dict[str, Any]:
    """What JupyterHub gives its managed service (read from one), for replicas it does not manage."""
    origin = public.rstrip("/")
    scopes = '["access:services", "access:services!service=mcp-notebook"]'
    return {
        "JUPYTERHUB_API_TOKEN": token,
        "JUPYTERHUB_CLIENT_ID": "service-mcp-notebook",
        "JUPYTERHUB_HOST": origin,
        "JUPYTERHUB_OAUTH_CALLBACK_URL": "/services/mcp-notebook/oauth_callback",
        "JUPYTERHUB_OAUTH_SCOPES": scopes,
        "JUPYTERHUB_OAUTH_ACCESS_SCOPES": scopes,
        "JUPYTERHUB_OAUTH_CLIENT_ALLOWED_SCOPES": "[]",
        "JUPYTERHUB_API_URL": api_url,
        "JUPYTERHUB_BASE_URL": "/",
        "JUPYTERHUB_PUBLIC_URL": public + "services/mcp-notebook/",
        "JUPYTERHUB_PUBLIC_HUB_URL": public + "hub/",
        "JUPYTERHUB_SERVICE_NAME": "mcp-notebook",
        "JUPYTERHUB_SERVICE_PREFIX": "/services/mcp-notebook/",
    }
