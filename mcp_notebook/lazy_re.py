"""Regular expressions compiled at their first use instead of at import (docs/DESIGN.md, "Loading,
eighth cut"): a module's group of patterns is compiled together the first time any of them is read,
then each is a plain instance attribute (one dictionary lookup a use)."""

from __future__ import annotations

import re
from typing import Any

_ALL: list[LazyPatterns] = []


class LazyPatterns:
    """Named patterns: ``LazyPatterns(word=r"\\w+")``, then ``P.word.findall(text)`` compiles them all
    on the first read of any. Safe from any thread: two first reads at once compile twice, same result."""

    def __init__(self, **sources: str | bytes) -> None:
        self._sources = sources
        _ALL.append(self)

    def __getattr__(self, name: str) -> Any:  # only for names not compiled yet
        sources = self.__dict__.get("_sources")
        if sources is None or name not in sources:
            raise AttributeError(name)
        self.compile()
        return self.__dict__[name]

    def compile(self) -> None:
        """Compile every pattern of the group now (they are plain attributes from then on)."""
        for key, source in self._sources.items():
            if key not in self.__dict__:
                self.__dict__[key] = re.compile(source)

    @property
    def compiled(self) -> bool:
        return all(key in self.__dict__ for key in self._sources)


def compile_all() -> None:
    """Compile every group made so far: the after-load thread calls it, so no read pays them."""
    for group in list(_ALL):
        group.compile()
