"""The shape of every method's params, checked in one place before any handler runs.

A small declarative schema per method (both eras): JSON types, required fields, nested objects,
maps and lists with typed values, string length and choice limits. A violation is -32602 with
a message and ``data.param`` naming the offending param by its path (``context.arguments.seq``),
so handlers receive only values of the types they expect. Unknown fields are ignored (the
revisions add fields over time); ``null`` for an optional field means absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .jsonrpc import INVALID_PARAMS, RpcError

MAX_URI = 8192
MAX_TEXT = 65536
MAX_LIST = 1000

_TYPE_NAMES = {str: "a string", bool: "a boolean", dict: "an object", list: "an array", float: "a number"}


@dataclass(frozen=True, slots=True)
class F:
    """One field: its JSON type (str, bool, dict, list, float for any number), and limits."""

    kind: type
    required: bool = False
    fields: Mapping[str, F] | None = None  # object: known fields
    values: F | None = None  # object used as a map, or array: the type of every value
    max_len: int | None = None  # strings: characters; arrays and maps: items
    nonempty: bool = False
    choices: tuple[Any, ...] | None = None

    def check(self, value: Any, path: str) -> None:
        if not _is(value, self.kind):
            raise invalid(path, f"must be {_TYPE_NAMES[self.kind]}")
        if self.choices is not None and value not in self.choices:
            raise invalid(path, "must be one of " + ", ".join(str(c) for c in self.choices))
        if self.nonempty and not value:
            raise invalid(path, "must not be empty")
        if self.max_len is not None and len(value) > self.max_len:
            raise invalid(path, f"is longer than {self.max_len}")
        if self.fields is not None:
            check_object(value, self.fields, path)
        if self.values is not None:
            is_map = isinstance(value, dict)
            for key, item in value.items() if is_map else enumerate(value):
                where = f"{path}.{key}" if is_map else f"{path}[{key}]"
                if item is None:
                    raise invalid(where, "must not be null")
                self.values.check(item, where)


def _is(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is str or kind is dict or kind is list:
        return type(value) is kind
    return isinstance(value, kind)


def invalid(path: str, problem: str) -> RpcError:
    shown = path if len(path) <= 200 else path[:200] + "…"
    return RpcError(INVALID_PARAMS, f"Invalid params: {shown} {problem}", {"param": shown})


def check_object(value: dict[str, Any], fields: Mapping[str, F], path: str = "") -> None:
    for name, spec in fields.items():
        where = f"{path}.{name}" if path else name
        item = value.get(name)
        if item is None:
            if spec.required:
                raise invalid(where, "is required")
            continue
        spec.check(item, where)


URI = F(str, required=True, nonempty=True, max_len=MAX_URI)
CURSOR = F(str, max_len=MAX_TEXT)
META = F(dict)  # its known keys are checked where they are used (the stateless era's version and capabilities)
_IMPLEMENTATION = {"name": F(str, max_len=MAX_TEXT), "version": F(str, max_len=MAX_TEXT), "title": F(str)}
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

METHODS: dict[str, dict[str, F]] = {
    "initialize": {
        "protocolVersion": F(str, required=True, max_len=100),
        "capabilities": F(dict),
        "clientInfo": F(dict, fields=_IMPLEMENTATION),
    },
    "ping": {},
    "logging/setLevel": {"level": F(str, required=True, choices=LOG_LEVELS)},
    "server/discover": {},
    "resources/list": {"cursor": CURSOR},
    "resources/templates/list": {"cursor": CURSOR},
    "resources/read": {"uri": URI},
    "resources/subscribe": {"uri": URI},
    "resources/unsubscribe": {"uri": URI},
    "completion/complete": {
        "ref": F(
            dict,
            required=True,
            fields={
                "type": F(str, required=True, choices=("ref/resource", "ref/prompt")),
                "uri": F(str, max_len=MAX_URI),
                "name": F(str, max_len=MAX_TEXT),
            },
        ),
        "argument": F(dict, required=True, fields={"name": F(str, required=True, max_len=MAX_TEXT), "value": F(str)}),
        "context": F(dict, fields={"arguments": F(dict, values=F(str), max_len=MAX_LIST)}),
    },
    "subscriptions/listen": {
        "notifications": F(
            dict,
            required=True,
            fields={
                "resourcesListChanged": F(bool),
                "resourceSubscriptions": F(list, values=URI, max_len=MAX_LIST),
            },
        )
    },
    "tools/list": {"cursor": CURSOR},
    "tools/call": {"name": F(str, required=True, max_len=MAX_TEXT), "arguments": F(dict)},
}


def check_params(method: str, params: dict[str, Any]) -> None:
    """Raise -32602 naming the first param of ``method`` whose type or limits are wrong."""
    if params.get("_meta") is not None:
        META.check(params["_meta"], "_meta")
    fields = METHODS.get(method)
    if fields is not None:
        check_object(params, fields)
