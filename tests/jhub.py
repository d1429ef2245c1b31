"""A real JupyterHub on loopback: configurable-http-proxy (tests/node), DummyAuthenticator with a
password, SimpleLocalProcessSpawner running this venv's ``jupyterhub-singleuser`` with the
mcp-notebook server extension, and the mcp-notebook service. Every wait is bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from jserver import free_port, load_hub, run
from jupyter_client import BlockingKernelClient

ROOT = Path(__file__).resolve().parents[1]
CHP = ROOT / "tests" / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
PASSWORD = "correct horse"
TESTER_TOKEN = "tester-" + os.urandom(12).hex()
SINGLEUSER = Path(sys.executable).with_name("jupyterhub-singleuser")

CONFIG = """
import sys
c = get_config()  # noqa
c.JupyterHub.bind_url = {public!r}
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.auth_token = {proxy_token!r}
c.JupyterHub.db_url = "sqlite:///{base}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{base}/cookie_secret"
c.JupyterHub.pid_file = "{base}/jupyterhub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.Authenticator.allowed_users = {{"alice", "bob"}}
c.Authenticator.admin_users = {{"root"}}
c.JupyterHub.allow_named_servers = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{base}/home/{{username}}"
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.args = [
    "--ServerApp.jpserver_extensions=mcp_notebook=True",
    "--allow-root",
    "--ServerApp.extra_static_paths={base}/static",  # pages a user's own server serves on the shared origin
]
c.Spawner.environment = {{
    "PYTHONPATH": {root!r},
    "JUPYTER_RUNTIME_DIR": lambda spawner: "{base}/run/" + spawner.user.name + "-" + (spawner.name or "default"),
}}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
# -- the block of docs/start/jupyterhub.md, as pasted ------------------------------------------
{docs_block}
# -- then what this machine needs: its public URL, the service's port, its test settings ------
c.JupyterHub.public_url = {public!r}
(service,) = c.JupyterHub.services
service["url"] = "http://127.0.0.1:{svc_port}"
service["command"] = service["command"][:3] + {svc_args!r}  # upstream_url: the public URL's origin here
service["cwd"] = "{base}"
service["environment"] = {{"PYTHONPATH": {root!r}}}
c.JupyterHub.services.append({{"name": "tester", "api_token": {tester!r}}})
c.JupyterHub.load_roles.append(
    {{
        "name": "tester",
        "scopes": ["admin:users", "admin:servers", "access:servers", "tokens", "read:users"],
        "services": ["tester"],
    }}
)
"""


def docs_config_block() -> str:
    """The ``jupyterhub_config.py`` block of docs/start/jupyterhub.md, exactly as a reader pastes it."""
    page = (ROOT / "docs" / "start" / "jupyterhub.md").read_text()
    section = page.split("## One URL for every user of a JupyterHub", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def _default_interrupts() -> None:
    """In the child before exec: SIGINT and SIGQUIT back to their defaults. A shell's background job
    (`cmd &`) starts with both ignored and passes that on: JupyterHub stops its servers and the
    service with SIGINT, which they then ignore, and outlived the harness's wait as orphans."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class LocalJupyterHub:
    """``jupyterhub`` with the proxy and the service, stopped by :meth:`stop`."""

    def __init__(self, base: Path, svc_args: tuple[str, ...] = (), extra_config: str = "", before_wait: Any = None):
        """``extra_config`` is appended to the config; ``before_wait(self)`` runs once JupyterHub is
        started and before the waits (replicas of the service the test runs itself)."""
        self.base = base
        self.port = free_port()
        self.hub_port = free_port()
        self.api_url = f"http://127.0.0.1:{self.hub_port}/hub/api"
        self.public = f"http://127.0.0.1:{self.port}/"
        self.service_url = f"{self.public}services/mcp-notebook/"
        self.mcp_url = self.service_url + "mcp"
        (base / "home").mkdir(parents=True, exist_ok=True)
        (base / "run").mkdir(parents=True, exist_ok=True)
        (base / "static").mkdir(parents=True, exist_ok=True)
        conf = CONFIG.format(
            public=self.public,
            hub_port=self.hub_port,
            api_port=free_port(),
            svc_port=free_port(),
            chp=str(CHP),
            proxy_token=os.urandom(16).hex(),
            base=str(base),
            password=PASSWORD,
            singleuser=str(SINGLEUSER),
            root=str(ROOT),
            svc_args=list(svc_args),
            tester=TESTER_TOKEN,
            docs_block=docs_config_block(),
        )
        (base / "jupyterhub_config.py").write_text(conf + extra_config)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
        env["PYTHONPATH"] = str(ROOT)
        self.log = open(base / "jupyterhub.log", "wb")  # closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(base / "jupyterhub_config.py")],
            cwd=str(base),
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=_default_interrupts,
        )
        self.api = httpx.Client(
            base_url=self.public + "hub/api/", headers={"Authorization": f"token {TESTER_TOKEN}"}, timeout=60
        )
        self.clients: list[BlockingKernelClient] = []
        if before_wait is not None:
            before_wait(self)
        self._wait(lambda: self.api.get("").status_code == 200, "JupyterHub API")
        self._wait(
            lambda: httpx.get(self.service_url + ".well-known/oauth-protected-resource").status_code == 200,
            "the service",
        )

    def _wait(self, ok: Any, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyterhub exited: {self.log_text()[-3000:]}")
            try:
                if ok():
                    return
            except (httpx.HTTPError, OSError):
                pass
            time.sleep(0.3)
        raise TimeoutError(f"{what} did not come up: {self.log_text()[-3000:]}")

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    # -- users, servers, kernels -------------------------------------------------------------
    def start_server(self, user: str, server: str = "") -> str:
        """Spawn a user's (named) server and wait until it is ready; its URL path."""
        self.api.post(f"users/{user}")  # 201, or 409 when the user exists already
        path = f"users/{user}/servers/{server}" if server else f"users/{user}/server"
        r = self.api.post(path)
        assert r.status_code in (201, 202, 400), r.text
        key = server or ""

        def ready() -> bool:
            model = self.api.get(f"users/{user}").json()
            s = (model.get("servers") or {}).get(key)
            return bool(s and s.get("ready"))

        self._wait(ready, f"{user}'s server {server!r}", timeout=120)
        return self.api.get(f"users/{user}").json()["servers"][key]["url"]

    def stop_server(self, user: str, server: str = "") -> None:
        path = f"users/{user}/servers/{server}" if server else f"users/{user}/server"
        self.api.delete(path)

        def stopped() -> bool:
            s = (self.api.get(f"users/{user}").json().get("servers") or {}).get(server or "")
            return not s

        self._wait(stopped, f"{user}'s server to stop", timeout=60)

    def kernel(
        self, user: str, notebook: str, code: str, server: str = "", before: str = ""
    ) -> tuple[str, BlockingKernelClient]:
        """A notebook session on the user's server, ``before`` run, the hub loaded, ``code`` run;
        (kernel id, client)."""
        url = self.public.rstrip("/") + self.start_server(user, server)
        r = self.api.post(
            url + "api/sessions", json={"path": notebook, "type": "notebook", "kernel": {"name": "python3"}}
        )
        assert r.status_code == 201, r.text
        kid = r.json()["kernel"]["id"]
        conn = self.base / "run" / f"{user}-{server or 'default'}" / f"kernel-{kid}.json"
        self._wait(conn.exists, f"the connection file of {kid}")
        kc = BlockingKernelClient(connection_file=str(conn))
        kc.load_connection_file()
        kc.start_channels(hb=False)
        kc.wait_for_ready(timeout=90)
        self.clients.append(kc)
        if before:
            run(kc, before)
        load_hub(kc)
        run(kc, code)
        return kid, kc

    def user_token(self, user: str) -> str:
        r = self.api.post(f"users/{user}/tokens", json={"note": "test", "expires_in": 3600})
        assert r.status_code == 201, r.text
        return r.json()["token"]

    def __enter__(self) -> LocalJupyterHub:
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        """Stopped on leaving; the log's tail printed first when set-up failed."""
        if error is not None:
            print(self.log_text()[-5000:])
        self.stop()

    def stop(self) -> None:
        for kc in self.clients:
            kc.stop_channels()
        self.api.close()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


def service_db(jupyterhub: LocalJupyterHub) -> Path:
    return jupyterhub.base / "mcp-notebook-oauth.sqlite"


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1)[:2000]
