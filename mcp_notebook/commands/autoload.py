"""``mcp-notebook autoload on|off|status``: load the extension in every kernel of an environment.

IPython kernels read ``ipython_kernel_config.py`` and ``ipython_kernel_config.json`` from the
profile directory and from ``{sys.prefix}/etc/ipython`` (``IPython.paths`` ENV_CONFIG_DIRS), so a
JSON file in the environment's prefix reaches every kernel started with that environment's Python,
whatever the user's profile says. We edit only ``InteractiveShellApp.extra_extensions`` in that
file: users set ``extensions`` in their own profiles, and a later file's list would replace ours
(traitlets merges list settings by replacement), while ``extra_extensions`` is meant for additions.
Everything else in the file is kept; ``off`` removes only our entry (and the file when it is
left empty). ``--user`` edits the user's profile instead (``$IPYTHONDIR/profile_default``).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .clients_config import bridge_command, read_json_object

EXTENSION = "mcp_notebook"
CONFIG_NAME = "ipython_kernel_config.json"
SECTION = "InteractiveShellApp"
KEY = "extra_extensions"
KEYS = ("extensions", "extra_extensions")  # both load extensions; status and off look at both


class AutoloadError(ValueError):
    """A config file we must not edit (not JSON, wrong shapes)."""


@dataclass(frozen=True)
class AutoloadState:
    path: Path
    enabled: bool

    def describe(self) -> str:
        return f"autoload {'on' if self.enabled else 'off'} ({self.path})"


def env_config_path(prefix: str | os.PathLike[str] | None = None) -> Path:
    """The environment-wide kernel config file: ``{prefix}/etc/ipython/ipython_kernel_config.json``."""
    return Path(prefix if prefix is not None else sys.prefix) / "etc" / "ipython" / CONFIG_NAME


def user_config_path(profile: str = "default") -> Path:
    """The user's profile kernel config file (``$IPYTHONDIR/profile_<name>``, ~/.ipython by default)."""
    from IPython.paths import get_ipython_dir

    return Path(get_ipython_dir()) / f"profile_{profile}" / CONFIG_NAME


def config_path(prefix: str | None = None, user: bool = False, profile: str = "default") -> Path:
    return user_config_path(profile) if user else env_config_path(prefix)


def _load(path: Path) -> dict[str, Any]:
    doc = read_json_object(path, AutoloadError, "is not valid JSON", "fix or remove it first")
    section = doc.get(SECTION, {})
    if not isinstance(section, dict):
        raise AutoloadError(f"{path}: {SECTION!r} is not an object")
    for key in KEYS:
        if key in section and not (isinstance(section[key], list) and all(isinstance(v, str) for v in section[key])):
            raise AutoloadError(f"{path}: {SECTION}.{key} is not a list of names")
    return doc


def _enabled(doc: dict[str, Any]) -> bool:
    section = doc.get(SECTION, {})
    return any(EXTENSION in section.get(key, []) for key in KEYS)


def _save(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def status(path: Path) -> AutoloadState:
    return AutoloadState(path, _enabled(_load(path)))


def enable(path: Path) -> AutoloadState:
    """Add the extension to ``extra_extensions`` (idempotent; other settings stay)."""
    doc = _load(path)
    if not _enabled(doc):
        section = doc.setdefault(SECTION, {})
        section[KEY] = [*section.get(KEY, []), EXTENSION]
        _save(path, doc)
    return AutoloadState(path, True)


def disable(path: Path) -> AutoloadState:
    """Remove the extension from both extension lists; drop what becomes empty (the file too)."""
    doc = _load(path)
    if not _enabled(doc):
        return AutoloadState(path, False)
    section = doc[SECTION]
    for key in KEYS:
        if key in section:
            section[key] = [v for v in section[key] if v != EXTENSION]
            if not section[key]:
                del section[key]
    if not section:
        del doc[SECTION]
    if doc:
        _save(path, doc)
    else:
        path.unlink()
    return AutoloadState(path, False)


def running_kernel_state() -> list[AutoloadState]:
    """For ``%mcp``: the files this kernel's environment and user profile would be autoloaded by."""
    out = []
    for path in (env_config_path(), _profile_path()):
        if path is None:
            continue
        try:
            out.append(status(path))
        except AutoloadError:
            continue
    return out


def _profile_path() -> Path | None:
    """The profile directory of the running shell, if any."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        location = shell.profile_dir.location if shell is not None and shell.profile_dir is not None else None
    except Exception:
        return None
    return Path(location) / CONFIG_NAME if location else None


def run(action: str, prefix: str | None = None, user: bool = False, profile: str = "default") -> int:
    """The CLI action: prints one line saying what is (now) the case."""
    path = config_path(prefix, user, profile)
    try:
        if action == "on":
            state = enable(path)
            print(f"{state.describe()}: every new kernel started with {_python_of(prefix, user)} loads mcp_notebook")
            where = " --user" if user else f" --prefix {prefix}" if prefix else ""
            print(f"undo with: {_own_command()} autoload off{where}")
        elif action == "off":
            state = disable(path)
            print(f"{state.describe()}: new kernels no longer load mcp_notebook from this file")
        else:
            print(status(path).describe())
    except (AutoloadError, OSError) as exc:
        print(f"mcp-notebook autoload: {exc}", file=sys.stderr)
        return 1
    return 0


def _own_command() -> str:
    """This environment's ``mcp-notebook`` by absolute path: the undo line works without activation."""
    import shlex

    command, args = bridge_command([])
    return shlex.join([command, *args[:-1]])


def _python_of(prefix: str | None, user: bool) -> str:
    if user:
        return "any Python that uses this IPython profile"
    if prefix is None or Path(prefix).resolve() == Path(sys.prefix).resolve():
        return sys.executable
    return f"the Python of {prefix}"
