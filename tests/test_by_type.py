"""Providers chosen by value type (issue #46): the variables provider's extensions are registered with
the types they serve, so a read enters only the code its value's type needs.

Each read is followed with ``sys.setprofile`` (as bench/trace_read.py follows a whole request): the
files of the package a call lands in are recorded.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from mcp_notebook.inkernel.config import MCPHub
from mcp_notebook.providers.frames.databases import DatabasesProvider
from mcp_notebook.providers.frames.provider import FramesProvider
from mcp_notebook.providers.kernel_info import KernelProvider
from mcp_notebook.providers.variables import EVERY_TYPE, ByType, Serves, VariablesProvider
from mcp_notebook.redact import ConfiguredNames
from mcp_notebook.resources import Resources

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_notebook"


class SubFrame(pd.DataFrame):
    """A user's subclass: served through its base's library."""


@dataclasses.dataclass
class Point:
    x: int
    y: int


def _wired(ns: dict[str, Any]) -> Resources:
    """The providers wired as the kernel's hub wires them (inkernel/kernel_hub.py)."""
    limits = MCPHub()
    variables = VariablesProvider(ns, {}, ConfiguredNames(limits), limits)
    frames = FramesProvider(variables, limits)
    databases = DatabasesProvider(variables, limits)
    variables.rows.register(frames.rows_serve, frames.index_links)
    variables.rows.register(databases.rows_serve, databases.index_links)
    variables.reprs.register(frames.reprs_serve, frames.engine_repr)
    variables.reads.register(EVERY_TYPE, lambda name: {"every": name})
    return Resources([KernelProvider(lambda: {}), variables, frames, databases])


def _files_called(fn: Any) -> set[str]:
    files: set[str] = set()
    root = str(PACKAGE) + "/"

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(root):
            files.add(frame.f_code.co_filename[len(root) :])

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return files


def test_an_ints_read_enters_no_frame_engine_database_or_structured_code():
    resources = _wired({"x": 1, "df": SubFrame({"a": [1, 2]}), "p": Point(1, 2)})
    files = _files_called(lambda: resources.read("nb://vars/x"))
    assert "providers/variables.py" in files
    entered = sorted(
        f for f in files if f.startswith("providers/frames/") or f.endswith(("structured.py", "kernel_info.py"))
    )
    assert entered == []
    doc = json.loads(resources.read("nb://vars/x")[0].text)
    assert doc["repr"] == "1" and doc["every"] == "x" and "frame" not in doc


def test_a_frame_and_a_model_still_get_their_extensions():
    resources = _wired({"df": SubFrame({"a": [1, 2]}), "p": Point(1, 2), "pts": [Point(0, 0)]})
    files = _files_called(lambda: resources.read("nb://vars/df"))
    assert "providers/frames/provider.py" in files  # a subclass of a pandas frame: served by its base's library
    doc = json.loads(resources.read("nb://vars/df")[0].text)
    assert doc["frame"] == "nb://frames/df" and doc["schema"] == "nb://frames/df/schema"
    point = json.loads(resources.read("nb://vars/p")[0].text)
    assert point["kind"] == "dataclass" and point["schema"] == "nb://vars/p/schema"
    listed = json.loads(resources.read("nb://vars")[0].text)
    assert {row["name"]: row.get("kind") for row in listed["variables"]}["pts"] == "list of dataclass"


class _Loud(type):
    """A metaclass whose attribute lookups run user code: a type check must never trigger it."""

    looked: list[str] = []

    def __getattr__(cls, name: str) -> Any:
        _Loud.looked.append(name)
        raise AttributeError(name)


def test_serves_decides_from_the_type_alone():
    class Odd(metaclass=_Loud):
        pass

    serves = Serves(types=frozenset({list}), libraries=frozenset({"pandas"}), markers=("__dataclass_fields__",))
    assert serves.match(list) and serves.match(SubFrame) and serves.match(Point)
    assert not serves.match(int) and not serves.match(dict) and not serves.match(Odd)
    assert _Loud.looked == []  # markers are read from each base's own __dict__, no __getattr__ runs
    assert EVERY_TYPE.match(Odd)


def test_by_type_remembers_per_type_and_forgets_on_a_registration():
    seen: list[type] = []

    class Counting(Serves):
        def match(self, cls: type) -> bool:
            seen.append(cls)
            return cls is int

    registry: ByType[str] = ByType()
    registry.register(Counting(), "ints")
    assert registry.of(int) == ("ints",) and registry.of(int) == ("ints",) and registry.of(str) == ()
    assert seen == [int, str]  # asked once per type
    registry.register(EVERY_TYPE, "all")
    assert registry.of(int) == ("ints", "all") and seen == [int, str, int]
