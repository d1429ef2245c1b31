"""JSON-RPC 2.0 framing: decoding messages, error codes, encoding replies; and the params of
every method, checked in one place before any handler runs.

Pure functions and small types; no I/O. Errors are raised as :class:`RpcError`, which
carries both the JSON-RPC error object and the HTTP status a transport should use.

**Params.** The shape of every method's params, checked in one place before any handler runs.

A small declarative schema per method (both eras): JSON types, required fields, nested objects,
maps and lists with typed values, string length and choice limits. A violation is -32602 with
a message and ``data.param`` naming the offending param by its path (``context.arguments.seq``),
so handlers receive only values of the types they expect. Unknown fields are ignored (the
revisions add fields over time); ``null`` for an optional field means absent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..budget import bounded_error
from ..lazy_re import LazyPatterns
from ..redact import REDACTOR

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022

RequestId = str | int


class RpcError(Exception):
    """A JSON-RPC error, with the HTTP status to answer it with."""

    def __init__(self, code: int, message: str, data: Any = None, *, status: int = 200):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status
        self.request_id: RequestId | None = None  # the id to answer with, when known before a Message exists

    def to_json(self) -> dict[str, Any]:
        """The error object, masked: messages echo client input (a URI, a typed argument) and user text."""
        err: dict[str, Any] = {"code": self.code, "message": REDACTOR.mask(self.message)}
        if self.data is not None:
            err["data"] = REDACTOR.mask_obj(self.data)
        return bounded_error(err)  # a host cuts long error text: ours fits its budget


class Message:
    """One decoded JSON-RPC message: a request (id set), a notification, or a response."""

    __slots__ = ("id", "is_response", "method", "params")

    def __init__(
        self, method: str | None, params: dict[str, Any], id: RequestId | None, is_response: bool = False
    ) -> None:
        self.method = method
        self.params = params
        self.id = id
        self.is_response = is_response

    def __repr__(self) -> str:
        return f"Message({self.method!r}, {self.params!r}, {self.id!r}, is_response={self.is_response!r})"

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.id is not None

    @property
    def is_notification(self) -> bool:
        return self.method is not None and self.id is None


# A \u escape of a UTF-16 surrogate: the only way a lone surrogate can enter a strictly decoded body.
_RE = LazyPatterns(surrogate_escape=rb"\\u[dD][89abcdefABCDEF]")  # at the first body, or after loading


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def parse_body(body: bytes) -> Any:
    """Decode a request body as strict JSON (UTF-8, no NaN/Infinity, no lone surrogates), or raise.

    Bytes that are not UTF-8 and non-standard constants are parse errors (-32700). A string holding
    an unpaired UTF-16 surrogate (``"\\ud800"``) cannot be encoded or compared reliably anywhere
    downstream, so it is refused here: -32602 naming the param when it sits under ``params``,
    otherwise -32600, with the message's id when that id is itself clean.
    """
    try:
        text = body.decode("utf-8")
        if text[:1] == "{" and text[-1:] == "}":  # the usual body: no whitespace around to skip
            value, end = _DECODER.raw_decode(text)
            if end != len(text):
                value = _DECODER.decode(text)  # raises the exact "Extra data" error
        else:
            value = _DECODER.decode(text[1:] if text[:1] == "\ufeff" else text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RpcError(PARSE_ERROR, f"Parse error: {_plain(str(exc))}", status=400) from None
    if _RE.surrogate_escape.search(body) is not None:
        where = lone_surrogate_path(value)
        if where is not None:
            path, holder = where
            code = INVALID_PARAMS if ".params" in f".{path}" else INVALID_REQUEST
            kind = "Invalid params" if code == INVALID_PARAMS else "Invalid Request"
            named = _plain(path) or "the message"
            err = RpcError(code, f"{kind}: {named} holds an unpaired UTF-16 surrogate", status=400)
            err.request_id = request_id_of(holder)
            raise err
    return value


def _plain(text: str) -> str:
    """A message safe to send back: bounded, and without characters that cannot be encoded."""
    return text[:200].encode("utf-8", "backslashreplace").decode("utf-8")


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def lone_surrogate_path(value: Any, path: str = "", holder: Any = None) -> tuple[str, Any] | None:
    """Where the first string (key or value) with an unpaired surrogate is, and its top-level message.

    Iterative, so a deeply nested document cannot exhaust the stack.
    """
    stack: list[tuple[Any, str, Any]] = [(value, path, holder)]
    while stack:
        item, where, top = stack.pop()
        if isinstance(item, str):
            if _has_lone_surrogate(item):
                return where, top
        elif isinstance(item, dict):
            top = item if top is None else top
            for key, sub in item.items():
                inner = f"{where}.{key}" if where else str(key)
                if _has_lone_surrogate(key):
                    return f"{where}.<key>" if where else "<key>", top
                stack.append((sub, inner, top))
        elif isinstance(item, list):
            for i, sub in enumerate(item):
                stack.append((sub, f"{where}[{i}]", sub if top is None and isinstance(sub, dict) else top))
    return None


def to_message(obj: Any) -> Message:
    """Validate one JSON value as a JSON-RPC 2.0 message."""
    if not isinstance(obj, dict):
        raise RpcError(INVALID_REQUEST, "Invalid Request: a message must be a JSON object", status=400)
    if obj.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', status=400)
    has_id = "id" in obj
    msg_id = obj.get("id")
    if has_id and (isinstance(msg_id, bool) or not isinstance(msg_id, (str, int))):
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer', status=400)
    method = obj.get("method")
    if method is None:
        if has_id and ("result" in obj or "error" in obj):
            return Message(None, {}, msg_id, is_response=True)
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "method" is missing', status=400)
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "method" must be a non-empty string', status=400)
    params = obj.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, 'Invalid params: "params" must be an object', status=400)
    return Message(method, params, msg_id if has_id else None)


def request_id_of(obj: Any) -> RequestId | None:
    """Best-effort id of a message that failed validation (for the error reply)."""
    if isinstance(obj, dict):
        msg_id = obj.get("id")
        if isinstance(msg_id, int) and not isinstance(msg_id, bool):
            return msg_id
        if isinstance(msg_id, str) and not _has_lone_surrogate(msg_id):
            return msg_id
    return None


def result(msg_id: RequestId, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}


def error(msg_id: RequestId | None, err: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": err.to_json()}


def refuse_batch(items: list[Any], err: RpcError) -> Any:
    """A batch refused as a whole (the revision forbids batches, too many items): the same error for
    each request in it, by its id; a single error with id null when it holds no request (each
    request is owed an answer, a notification or a response none)."""
    ids = [
        request_id_of(item)
        for item in items
        if isinstance(item, dict) and isinstance(item.get("method"), str) and request_id_of(item) is not None
    ]
    return [error(i, err) for i in ids] if ids else error(None, err)


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = REDACTOR.mask_obj(params)  # log data and URIs leave the hub here too
    return msg


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(value: Any) -> bytes:
    """Compact JSON encoding used on the wire; never fails on text.

    UTF-8 by default. A string with an unpaired surrogate (from a user's value; requests holding one
    are refused at parse) cannot be UTF-8: the whole value is then sent as ASCII JSON, where it is a
    valid ``\\udXXX`` escape.
    """
    if type(value) is int:  # request ids, on every reply
        return b"%d" % value
    text = _ENCODER.encode(value)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode()


# -- the params of each method ------------------------------------------------------------------
MAX_URI = 8192
MAX_TEXT = 65536
MAX_LIST = 1000

_TYPE_NAMES = {str: "a string", bool: "a boolean", dict: "an object", list: "an array", float: "a number"}


class F:
    """One field: its JSON type (str, bool, dict, list, float for any number), and limits (made
    once, at import; not changed afterwards)."""

    __slots__ = ("choices", "fields", "kind", "max_len", "nonempty", "required", "values")

    def __init__(
        self,
        kind: type,
        required: bool = False,
        fields: Mapping[str, F] | None = None,  # object: known fields
        values: F | None = None,  # object used as a map, or array: the type of every value
        max_len: int | None = None,  # strings: characters; arrays and maps: items
        nonempty: bool = False,
        choices: tuple[Any, ...] | None = None,
    ) -> None:
        self.kind = kind
        self.required = required
        self.fields = fields
        self.values = values
        self.max_len = max_len
        self.nonempty = nonempty
        self.choices = choices

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
