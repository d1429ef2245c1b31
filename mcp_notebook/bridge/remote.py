"""Hubs on a remote Jupyter server, reached through its mcp-notebook server extension.

``mcp-notebook bridge --server URL`` and ``mcp-notebook config … --server URL`` use this: the
server's ``mcp-notebook/kernels`` listing replaces the local runtime files, and the Jupyter token
(from an environment variable or a file, never from the command line) replaces the hub's token.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..hubclient.blocking import server_kernels
from ..hubclient.rules import UpstreamError
from ..runtime import HubRecord, select
from .hub_selection import POLL_SECONDS, FrontRecord, FrontSelector, NoHub, Selector
from .stdio import Bridge

TOKEN_ENVS = ("MCP_NOTEBOOK_SERVER_TOKEN", "JUPYTER_TOKEN")


class TokenError(ValueError):
    """No Jupyter token where we were told to look."""


def server_base(url: str) -> str:
    """The server's base URL with one trailing slash (``https://host/user/me/``)."""
    url = url.strip()
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--server must be an http:// or https:// URL, got {url!r}")
    return url.rstrip("/") + "/"


def read_token(token_file: str | None = None) -> str:
    """The Jupyter token: the file's first line when given, else $MCP_NOTEBOOK_SERVER_TOKEN or $JUPYTER_TOKEN."""
    if token_file:
        try:
            token = Path(token_file).expanduser().read_text().strip().splitlines()[0].strip()
        except (OSError, IndexError) as exc:
            raise TokenError(f"cannot read a token from {token_file}: {exc}") from None
        if token:
            return token
        raise TokenError(f"{token_file} is empty")
    for name in TOKEN_ENVS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    raise TokenError(
        f"no Jupyter token: set {TOKEN_ENVS[0]} (or {TOKEN_ENVS[1]}) in the environment, or pass --token-file PATH"
    )


@dataclass
class RemoteSelector(Selector):
    """Picks a kernel with a hub on a Jupyter server (by id or prefix, notebook path, or the newest)."""

    server: str = ""
    token: str = field(default="", repr=False)

    def describe(self) -> str:
        return f"{super().describe()} on {self.server}"

    def no_hub_message(self) -> str:
        return (
            f"No kernel with a running mcp-notebook hub for {super().describe()} on the Jupyter server {self.server}. "
            "Run `%load_ext mcp_notebook` in the notebook's kernel; the server needs the mcp-notebook server "
            "extension (installed with the package) and the kernel must run on the server's host."
        )

    def listing(self) -> list[dict[str, Any]]:
        """``GET {server}mcp-notebook/kernels`` with the Jupyter token (the hub client's)."""
        try:
            status, _, body = server_kernels(self.server, self.token)
        except UpstreamError as exc:
            raise OSError(str(exc)) from None
        if status in (401, 403):
            raise NoHub(f"The Jupyter server {self.server} refused the token (HTTP {status}).")
        if status == 404:
            raise NoHub(
                f"The Jupyter server {self.server} has no mcp-notebook extension (HTTP 404 for "
                "mcp-notebook/kernels): install mcp-notebook in the server's environment and restart it."
            )
        if status != 200:
            raise OSError(f"HTTP {status} from {self.server}")
        data = json.loads(body)
        return [e for e in data if isinstance(e, dict) and e.get("kernel_id")] if isinstance(data, list) else []

    def records(self) -> list[HubRecord]:
        out = []
        for entry in self.listing():
            info = {
                **entry,
                "url": self.server + f"mcp-notebook/kernels/{entry['kernel_id']}/mcp",
                "token": self.token,
                "remote": True,
            }
            out.append(HubRecord(Path(self.server), info, True))
        return out

    def find(self, prefer: HubRecord | None = None, wait: float = 0.0, stop: Any = None) -> HubRecord:
        deadline = time.monotonic() + wait
        pref = (prefer.kernel_id, prefer.notebook_path) if prefer is not None else None
        while True:
            try:
                found = select(self.records(), self.notebook, self.kernel, pref)
            except (OSError, ValueError) as exc:  # the server restarts or the network blinks: keep waiting
                found, error = None, exc
            else:
                error = None
            if found is not None:
                return found
            if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                detail = f" ({error})" if error is not None else ""
                raise NoHub(self.no_hub_message() + detail)
            time.sleep(POLL_SECONDS)


def run_remote_bridge(
    server: str,
    token_file: str | None,
    notebook: str | None,
    kernel: str | None,
    reconnect_timeout: float,
    latest: bool = False,
    channel: bool = False,
) -> int:
    """Bridge to one kernel of a Jupyter server (a selector, or ``latest``), else to all of them
    through the server extension's ``mcp-notebook/mcp``."""
    base, token = server_base(server), read_token(token_file)
    if notebook or kernel or latest:
        selector: Selector = RemoteSelector(notebook, kernel, server=base, token=token)
    else:
        info = {"url": base + "mcp-notebook/mcp", "token": token, "remote": True, "started_at": time.time()}
        selector = FrontSelector(
            FrontRecord(Path(base), info, True, serves=f"every kernel of the Jupyter server {base}")
        )
    return Bridge(selector, reconnect_timeout=reconnect_timeout, channel=channel).run()
