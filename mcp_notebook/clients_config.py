"""Config snippets for MCP hosts (Claude Code, Claude Desktop, VS Code, Cursor).

The default entry runs ``mcp-notebook bridge``: fixed, and free of secrets. The HTTP entry
(``--http``) names a live hub's URL and needs its token: the printed snippet shows a placeholder,
only a written file (mode 0600) holds the real token.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

HOSTS = ("claude-code", "claude-desktop", "vscode", "cursor")
TOKEN_PLACEHOLDER = "<token: see `mcp-notebook config ... --http --write`>"
SECRET_ENV = frozenset({"MCP_NOTEBOOK_SERVER_TOKEN", "JUPYTER_TOKEN"})  # a remote server's token (bridge --server)


class ConfigError(ValueError):
    """A request this host cannot take, or a config file we must not overwrite."""


def bridge_command(bridge_args: list[str]) -> tuple[str, list[str]]:
    """The command a host runs: this environment's ``mcp-notebook`` script, by absolute path."""
    script = Path(sys.executable).with_name("mcp-notebook.exe" if os.name == "nt" else "mcp-notebook")
    if script.exists():
        return str(script), ["bridge", *bridge_args]
    return sys.executable, ["-m", "mcp_notebook.cli", "bridge", *bridge_args]


def _env() -> dict[str, str]:
    """A non-default runtime dir must reach the bridge, or it would look elsewhere."""
    value = os.environ.get("JUPYTER_RUNTIME_DIR")
    return {"JUPYTER_RUNTIME_DIR": value} if value else {}


def entry(
    host: str,
    *,
    bridge_args: list[str],
    url: str | None = None,
    token: str | None = None,
    env: dict[str, str] | None = None,
    scheme: str = "Bearer",
) -> dict[str, Any]:
    """The server entry for ``host``: stdio bridge, or HTTP when ``url`` is given.

    ``env`` adds secrets for the bridge (a remote server's token); ``scheme`` is the
    Authorization scheme of the HTTP entry (``token`` for a Jupyter server).
    """
    if host not in HOSTS:
        raise ConfigError(f"unknown host {host!r}; choose one of {', '.join(HOSTS)}")
    if url is None:
        command, args = bridge_command(bridge_args)
        out: dict[str, Any] = {"command": command, "args": args}
        if host in ("claude-code", "vscode"):
            out = {"type": "stdio", **out}
        if _env() or env:
            out["env"] = {**_env(), **(env or {})}
        return out
    if host == "claude-desktop":
        raise ConfigError("Claude Desktop's config file takes stdio servers only: use the bridge (drop --http)")
    headers = {"Authorization": f"{scheme} {token}"} if token else {}
    out = {"url": url, "headers": headers}
    if host in ("claude-code", "vscode"):
        out = {"type": "http", **out}
    return out


def top_key(host: str) -> str:
    return "servers" if host == "vscode" else "mcpServers"


def snippet(host: str, name: str, server: dict[str, Any]) -> dict[str, Any]:
    return {top_key(host): {name: server}}


def default_path(host: str) -> Path:
    """Where --write puts the entry: project files for Claude Code, VS Code, Cursor; the app's file for Claude Desktop."""
    if host == "claude-code":
        return Path.cwd() / ".mcp.json"
    if host == "vscode":
        return Path.cwd() / ".vscode" / "mcp.json"
    if host == "cursor":
        return Path.cwd() / ".cursor" / "mcp.json"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if os.name == "nt":
        return Path(os.environ.get("APPDATA", Path.home())) / "Claude" / "claude_desktop_config.json"
    return Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "Claude" / "claude_desktop_config.json"


def write(host: str, path: Path, name: str, server: dict[str, Any]) -> Path:
    """Merge the entry into the file at ``path`` (other entries stay); owner-only when it holds a token."""
    doc: dict[str, Any] = {}
    if path.exists():
        try:
            doc = json.loads(path.read_text() or "{}")
        except ValueError as exc:
            raise ConfigError(f"{path} is not plain JSON ({exc}); add the snippet by hand") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path} does not hold a JSON object; add the snippet by hand")
    servers = doc.setdefault(top_key(host), {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: {top_key(host)!r} is not an object")
    servers[name] = server
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = bool(server.get("headers")) or any(k in SECRET_ENV for k in server.get("env") or {})
    # An existing file keeps its mode: it may hold other entries' tokens (owner-only stays owner-only).
    mode = 0o600 if secret else stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)
    return path


def masked(server: dict[str, Any]) -> dict[str, Any]:
    """The entry as printed: any token replaced by a placeholder."""
    out = dict(server)
    env = server.get("env") or {}
    if any(k in SECRET_ENV for k in env):
        out["env"] = {k: (TOKEN_PLACEHOLDER if k in SECRET_ENV else v) for k, v in env.items()}
    auth = (server.get("headers") or {}).get("Authorization")
    if auth:
        out["headers"] = {"Authorization": f"{auth.split(' ', 1)[0]} {TOKEN_PLACEHOLDER}"}
    return out
