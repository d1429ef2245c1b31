"""Which variables the hub exposes, and what it remembers of the ones it hides (their strings are
masked wherever text leaves the hub)."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from types import ModuleType
from typing import Any

from ..redact import REDACTOR, NameFilter, clearly_secret_name, contains_secret, hidden_strings

_SECRET_SCAN_CHARS = 8192  # a string variable holding a credential shape in its first 8 KB is hidden


class ConfiguredNames:
    """The name filter of the hub's settings (secret words, include and exclude patterns), rebuilt
    when they change (``%config`` while the hub runs); the redactor's name check follows it."""

    def __init__(self, config: Any):
        self._config = config
        self._cache: tuple[tuple, NameFilter] | None = None

    def __call__(self) -> NameFilter:
        cfg = self._config
        key = (tuple(cfg.secret_words), tuple(cfg.include_names), tuple(cfg.exclude_names))
        cached = self._cache
        if cached is None or cached[0] != key:
            cached = self._cache = (key, NameFilter(*key))
            REDACTOR.set_name_check(cached[1].looks_secret)
        return cached[1]


class ExposureRules:
    """Which names the hub exposes: not IPython's own, modules, names the user hid (``%mcp hide``),
    names the rules call secret, or strings with a credential's shape; what is hidden is remembered
    so its strings are masked wherever text leaves the hub."""

    def __init__(self, hidden_ns: MutableMapping[str, Any], name_filter: Callable[[], NameFilter]):
        self._hidden_ns = hidden_ns
        self._filter = name_filter
        self.user_hidden: set[str] = set()

    def exposable(self, name: str, value: Any) -> bool:
        if name.startswith("_") or name in self.user_hidden:
            return False
        if name in self._hidden_ns and self._hidden_ns[name] is value:
            return False
        if isinstance(value, ModuleType) or not self._filter().allowed(name) or contains_secret(name):
            return False
        if type(value) is str and contains_secret(value[:_SECRET_SCAN_CHARS]):
            return False
        return True

    def remember_hidden(self, name: str, value: Any) -> None:
        """A variable the user or the rules hide: its strings are masked wherever text leaves the hub
        (cell sources, outputs, other values). IPython's own names and modules are not secrets."""
        if name.startswith("_") or isinstance(value, ModuleType):
            return
        if name in self._hidden_ns and self._hidden_ns[name] is value:
            return
        # A bare `key`/`token` is often a loop variable holding a column name or a word: only its
        # token-like values are remembered; names that say "secret" clearly remember every string.
        sure = name in self.user_hidden or not self._filter().looks_secret(name) or clearly_secret_name(name)
        try:
            REDACTOR.add(hidden_strings(value, sure=sure))
        except Exception:  # a value mutating under us: the next cell tries again
            pass

    def visible(self, name: str) -> bool:
        """Facts about ``name`` (not its value) may be told: not hidden by the user or the rules."""
        hidden = name.startswith("_") or name in self.user_hidden or contains_secret(name)
        return not hidden and self._filter().allowed(name)
