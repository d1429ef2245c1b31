"""Config snippets for MCP hosts (Claude Code, Claude Desktop, VS Code, Cursor, Codex).

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

HOSTS = ("claude-code", "claude-desktop", "vscode", "cursor", "codex")
TOKEN_PLACEHOLDER = "<token: see `mcp-notebook config ... --http --write`>"
SECRET_ENV = frozenset({"MCP_NOTEBOOK_SERVER_TOKEN", "JUPYTER_TOKEN"})  # a remote server's token (bridge --server)


class ConfigError(ValueError):
    """A request this host cannot take, or a config file we must not overwrite."""


def bridge_command(bridge_args: list[str]) -> tuple[str, list[str]]:
    """The command a host runs: this environment's ``mcp-notebook`` script, by absolute path."""
    script = Path(sys.executable).with_name("mcp-notebook.exe" if os.name == "nt" else "mcp-notebook")
    if script.exists():
        return str(script), ["bridge", *bridge_args]
    return sys.executable, ["-m", "mcp_notebook", "bridge", *bridge_args]


_RUNTIME_OVERRIDES = ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "JUPYTER_PLATFORM_DIRS", "XDG_DATA_HOME")


def _env() -> dict[str, str]:
    """``JUPYTER_RUNTIME_DIR`` when the runtime dir differs from the default a host's bare environment gives.

    Hosts start stdio servers with a few variables only (HOME, PATH, ...), so a runtime dir that
    comes from this shell's environment must be spelled out, or the bridge would look elsewhere.
    """
    from jupyter_core.paths import jupyter_runtime_dir  # the path only: nothing is created

    current = Path(jupyter_runtime_dir())
    saved = {k: os.environ.pop(k) for k in _RUNTIME_OVERRIDES if k in os.environ}
    try:
        default = Path(jupyter_runtime_dir())
    finally:
        os.environ.update(saved)
    return {} if current.resolve() == default.resolve() else {"JUPYTER_RUNTIME_DIR": str(current)}


_setup_lines: list[dict[str, str]] | None = None


def setup_lines() -> list[dict[str, str]]:
    """Copyable set-up lines for the JupyterLab panel, computed once per process.

    They name this environment's ``mcp-notebook`` by absolute path (the kernel's environment is
    often not the terminal's, and hosts start servers without an activated venv) and carry
    ``JUPYTER_RUNTIME_DIR`` when it is not the default. Never a token.
    """
    global _setup_lines
    if _setup_lines is None:
        import shlex

        command, args = bridge_command([])
        cli = shlex.join([command, *args[:-1]])
        env = _env()
        prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in env.items())
        claude_env = "".join(f"-e {k}={shlex.quote(v)} " for k, v in env.items())
        lines = [("Claude Code", f"claude mcp add {claude_env}notebook -- {cli} bridge")]
        hosts = (("Claude Desktop", "claude-desktop"), ("VS Code", "vscode"), ("Cursor", "cursor"), ("Codex", "codex"))
        for client, host in hosts:
            lines.append((client, f"{prefix}{cli} config {host} --write"))
        _setup_lines = [{"client": client, "line": line} for client, line in lines]
    return _setup_lines


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
    if host == "codex":  # Codex's streamable HTTP form; it takes no empty header table
        return {"url": url, "http_headers": headers} if headers else {"url": url}
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
    if host == "codex":
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if os.name == "nt":
        return Path(os.environ.get("APPDATA", Path.home())) / "Claude" / "claude_desktop_config.json"
    return Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "Claude" / "claude_desktop_config.json"


def read_json_object(path: Path, error: type[Exception], not_json: str, advice: str) -> dict[str, Any]:
    """The JSON object in the file at ``path`` ({} when it is absent or empty), or ``error`` saying
    what is wrong with the file and what to do about it."""
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text() or "{}")
    except ValueError as exc:
        raise error(f"{path} {not_json} ({exc}); {advice}") from None
    if not isinstance(doc, dict):
        raise error(f"{path} does not hold a JSON object; {advice}")
    return doc


def write(host: str, path: Path, name: str, server: dict[str, Any]) -> Path:
    """Merge the entry into the file at ``path`` (other entries stay); owner-only when it holds a token."""
    if host == "codex":
        from .clients_toml import TomlError, merged_toml

        try:
            text = merged_toml(path.read_text() if path.exists() else "", name, server, str(path))
        except TomlError as exc:
            raise ConfigError(str(exc)) from None
    else:
        doc = read_json_object(path, ConfigError, "is not plain JSON", "add the snippet by hand")
        servers = doc.setdefault(top_key(host), {})
        if not isinstance(servers, dict):
            raise ConfigError(f"{path}: {top_key(host)!r} is not an object")
        servers[name] = server
        text = json.dumps(doc, indent=2) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = bool(server.get("headers") or server.get("http_headers"))
    secret = secret or any(k in SECRET_ENV for k in server.get("env") or {})
    # An existing file keeps its mode: it may hold other entries' tokens (owner-only stays owner-only).
    mode = 0o600 if secret else stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)
    return path


NEXT_STEPS = {
    "claude-code": (
        "Claude Code asks you to approve servers from a project .mcp.json: start `claude` in this directory and "
        "approve the 'notebook' server when asked (or later in /mcp); `claude mcp list` shows it as pending until "
        "then, and `claude mcp reset-project-choices` asks again."
    ),
    "claude-desktop": "Restart Claude Desktop (quit it fully) so it reads the new server.",
    "vscode": "In VS Code open the MCP servers view (or .vscode/mcp.json) and start the 'notebook' server.",
    "cursor": "In Cursor open Settings > MCP and enable the 'notebook' server.",
    "codex": "Start `codex` (or restart it): it starts the 'notebook' server; `codex mcp list` shows it, /mcp in a session.",
}


def next_steps(host: str, name: str = "notebook") -> str:
    """What the user still has to do in the host after its file was written."""
    return NEXT_STEPS[host].replace("'notebook'", repr(name))


def channel_steps(name: str = "notebook") -> str:
    """How to start Claude Code so it listens to the bridge's channel (a development channel)."""
    return (
        f"start Claude Code (2.1.80 or later, signed in with a claude.ai account) with "
        f"`claude --dangerously-load-development-channels server:{name}` to receive the notebook's change events"
    )


def repo_root(path: Path) -> Path | None:
    """The git work tree holding ``path`` (a directory with .git), if any."""
    for parent in [path.parent.resolve(), *path.parent.resolve().parents]:
        if (parent / ".git").exists():
            return parent
    return None


def add_to_gitignore(path: Path) -> Path:
    """Add ``path`` (anchored at the repository root) to the repository's .gitignore; idempotent."""
    root = repo_root(path)
    if root is None:
        raise ConfigError(f"{path} is not inside a git repository: nothing to ignore it in")
    entry = "/" + path.resolve().relative_to(root).as_posix()
    ignore = root / ".gitignore"
    text = ignore.read_text() if ignore.exists() else ""
    if entry not in text.splitlines():
        with ignore.open("a") as fh:
            if text and not text.endswith("\n"):
                fh.write("\n")
            fh.write(f"# holds an mcp-notebook token (mcp-notebook config --http)\n{entry}\n")
    return ignore


def masked(server: dict[str, Any]) -> dict[str, Any]:
    """The entry as printed: any token replaced by a placeholder."""
    out = dict(server)
    env = server.get("env") or {}
    if any(k in SECRET_ENV for k in env):
        out["env"] = {k: (TOKEN_PLACEHOLDER if k in SECRET_ENV else v) for k, v in env.items()}
    for key in ("headers", "http_headers"):
        auth = (server.get(key) or {}).get("Authorization")
        if auth:
            out[key] = {"Authorization": f"{auth.split(' ', 1)[0]} {TOKEN_PLACEHOLDER}"}
    return out
