"""JSON-RPC 2.0 framing: decoding messages, error codes, encoding replies.

Pure functions and small types; no I/O. Errors are raised as :class:`RpcError`, which
carries both the JSON-RPC error object and the HTTP status a transport should use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

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

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


@dataclass(slots=True)
class Message:
    """One decoded JSON-RPC message: a request (id set), a notification, or a response."""

    method: str | None
    params: dict[str, Any]
    id: RequestId | None
    is_response: bool = False

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.id is not None

    @property
    def is_notification(self) -> bool:
        return self.method is not None and self.id is None


def parse_body(body: bytes) -> Any:
    """Decode a request body as JSON, or raise a parse error."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RpcError(PARSE_ERROR, f"Parse error: {exc}", status=400) from None


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
        if isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool):
            return msg_id
    return None


def result(msg_id: RequestId, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}


def error(msg_id: RequestId | None, err: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": err.to_json()}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def dumps(value: Any) -> bytes:
    """Compact JSON encoding used on the wire."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
