"""A raw peer on a real kernel's control channel (jupyter_client's Session signs what it sends): the
hub's MCP carrier over control, driven with any content, header or msg_id. Every wait is bounded."""

from __future__ import annotations

import json
import queue
import time
from typing import Any

STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}


def _ascii_json(obj: Any) -> bytes:
    """Lone surrogates travel as ``\\ud800`` escapes, as a hostile peer may send them."""
    return json.dumps(obj, ensure_ascii=True, default=str).encode()


class ControlPeer:
    """One sender (its own Session id) on the kernel's control socket."""

    def __init__(self, km: Any):
        self.kc = km.client()
        self.kc.start_channels(shell=False, iopub=False, stdin=False, hb=False, control=True)
        self.session = self.kc.session
        self.session.pack = _ascii_json
        self._stash: dict[str, list[dict[str, Any]]] = {}
        info = self.ask("mcp_info_request", {})[0]["content"]
        self.token = info["token"]
        self.host = info["url"].split("/")[2]

    def close(self) -> None:
        self.kc.stop_channels()

    def send(self, msg_type: str, content: Any, msg_id: str | None = None, header: dict | None = None) -> str:
        msg = self.session.msg(msg_type, content if isinstance(content, dict) else {})
        if not isinstance(content, dict):
            msg["content"] = _ascii_json(content).decode()  # sent as it is: any JSON value
        if msg_id is not None:
            msg["header"]["msg_id"] = msg["msg_id"] = msg_id
        msg["header"].update(header or {})
        self.kc.control_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def replies(self, msg_id: str, timeout: float = 15, final: bool = True, count: int = 1) -> list[dict[str, Any]]:
        """Replies to ``msg_id`` until ``count`` final ones came (``final=False``: the first ``count``)."""
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            for msg in self._stash.pop(msg_id, []):
                got.append(msg)
            done = [m for m in got if m["msg_type"] == "mcp_info_reply" or m["content"].get("final") or not final]
            if len(done) >= count:
                return got
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(done)} of {count} answers to {msg_id} ({len(got)} messages)")
            try:
                msg = self.kc.control_channel.get_msg(timeout=min(remaining, 1.0))
            except queue.Empty:
                continue
            self._stash.setdefault(str(msg["parent_header"].get("msg_id")), []).append(msg)

    def drain(self, seconds: float = 0.3) -> dict[str, list[dict[str, Any]]]:
        """Everything that came in ``seconds`` and was not asked for yet, by parent msg_id."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                msg = self.kc.control_channel.get_msg(timeout=remaining)
            except queue.Empty:
                break
            self._stash.setdefault(str(msg["parent_header"].get("msg_id")), []).append(msg)
        out, self._stash = self._stash, {}
        return out

    def ask(self, msg_type: str, content: Any, **kw: Any) -> list[dict[str, Any]]:
        return self.replies(self.send(msg_type, content, kw.pop("msg_id", None), kw.pop("header", None)), **kw)

    def headers(self, method: str = "resources/read", name: str | None = "nb://vars/x") -> dict[str, str]:
        h = {
            "host": self.host,
            "authorization": f"Bearer {self.token}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": STATELESS,
            "mcp-method": method,
        }
        if name is not None:
            h["mcp-name"] = name
        return h

    def request(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        """The content of an mcp_request carrying one stateless-era message."""
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
        return {"method": "POST", "headers": self.headers(method, name), "body": json.dumps(body)}

    def read(self, uri: str = "nb://vars/x") -> dict[str, Any]:
        return self.request("resources/read", {"uri": uri}, uri)

    def listen(self, uris: list[str]) -> dict[str, Any]:
        return self.request("subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}})


def status_of(replies: list[dict[str, Any]]) -> int:
    return int(replies[0]["content"]["status"])


def body_of(replies: list[dict[str, Any]]) -> str:
    return "".join(m["content"].get("body") or "" for m in replies)
