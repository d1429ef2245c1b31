"""What both eras share: the resources, settings and tools, the lock, the encoded-reply caches,
the activity callbacks, and the handlers of the methods both eras serve.

An era object (:mod:`.handshake`, :mod:`.stateless`) holds one :class:`Core` and hands it its
own rules (:class:`EraRules`: its method table, its not-found code, how it decorates a result);
the core never asks which era a request belongs to.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .. import budget
from ..providers.base import Provider
from ..providers.optional import missing_package
from ..redact import REDACTOR
from ..resources import Resources
from ..revisions import knows
from ..types import InvalidResourceParams, ResourceNotFound, ResourceReadError
from . import jsonrpc as rpc
from .apps import server_capability
from .cursors import decode_cursor, encode_cursor
from .exchange import Answer, Ctx, ServerSettings
from .jsonrpc import MAX_URI, RpcError, check_params

if TYPE_CHECKING:
    from .tools import Tools

log = logging.getLogger("mcp_notebook.protocol")

MAX_COMPLETIONS = 100
# Listing methods answered from cached JSON, and the bytes between the id and the first item.
LIST_METHODS = {
    "resources/list": b',"result":{"resources":[',
    "resources/templates/list": b',"result":{"resourceTemplates":[',
}
READ_CACHE_SIZE = 4096  # encoded read replies kept (cleared when full)
REPLY_START = b'{"jsonrpc":"2.0","id":'
# The bytes of a plain URI: its JSON string and its header value are the URI itself (no quote,
# backslash, space, control or non-ASCII character); plain also means no "=" first (not the
# "=?base64?...?=" form of Mcp-Name).
PLAIN_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:/._~!$&'()*+,;=@%?#[]-"

Handler = Callable[[Ctx, dict[str, Any]], dict[str, Any]]
ReadKey = tuple[str, str]  # (revision, uri): the revision also names the era
# A cached read: (stamp, encoded result tail, the URI's provider, the URI). One immutable tuple, so
# a reader on another thread sees a whole entry, old or new, never half of each.
CachedRead = tuple[Any, bytes, Provider, str]


class ReadAccess:
    """What an era's ``read_access`` grants a cached read: its revision, the reply's headers, and who
    asked (the handshake era: the session id; the stateless era: the client's ``clientInfo``). A plain
    class, not a ``NamedTuple`` (~0.2 ms to create at import: DESIGN, "Loading, eighth cut")."""

    __slots__ = ("asker", "reply_headers", "version")

    def __init__(self, version: str, reply_headers: dict[str, str], asker: Any) -> None:
        self.version = version
        self.reply_headers = reply_headers
        self.asker = asker


if TYPE_CHECKING:  # a type only: not made at import ("Loading, eighth cut")

    class EraRules(Protocol):
        """What the core needs of an era to run one of its requests."""

        methods: Mapping[str, Handler]
        not_found: int  # the JSON-RPC code of a resource that does not exist

        def decorate(self, ctx: Ctx, method: str, value: dict[str, Any]) -> dict[str, Any]: ...


class Core:
    """Shared state and shared handlers of both eras."""

    def __init__(self, resources: Resources, settings: ServerSettings):
        self.resources = resources
        self.settings = settings
        self.budget = max(2_000, settings.max_result_chars - budget.RESERVE)  # a handler's result, as sent
        self._tools: Tools | None = None  # made at the first tools/* request or after loading (tools)
        self._tools_lock = threading.Lock()
        self.tool_setup: list[Callable[[Tools], Any]] = []  # what composition sites add to the tools, when made
        self.lock = threading.RLock()
        self.closed = False
        self.on_activity: Callable[[], None] | None = None
        self.activity_listeners: list[Callable[[], None]] = []  # e.g. widgets; called like on_activity
        # The handlers both eras serve, by method; each era adds its own to make its table.
        self.handlers: dict[str, Handler] = {
            "resources/list": self.list_resources,
            "resources/templates/list": self.list_templates,
            "resources/read": self.read,
            "completion/complete": self.complete,
            "tools/list": lambda ctx, params: self.tools.list_tools(ctx, params),
            "tools/call": lambda ctx, params: self.tools.call_tool(ctx, params),
        }
        # (revision, URI) -> (stamp, encoded result tail, the URI's provider, the URI): the provider
        # is kept so a hit asks it for its token without looking it up again (a provider added
        # since moves the resources' generation, which is in the stamp)
        self._read_cache: dict[ReadKey, CachedRead] = {}
        # revision -> {a plain URI's bytes -> the same entry}: the flat path's per-URI record, found
        # by the bytes a request carries (no decoding, no key to build); cleared with the cache
        self._plain_reads: dict[str, dict[bytes, CachedRead]] = {}
        # (method, revision, id(provider)) -> (token, items when untokened, encoded items)
        self._listings: dict[tuple[str, str, int], tuple[Any, list[Any] | None, list[bytes]]] = {}

    @property
    def tools(self) -> Tools:
        """tools/list and tools/call, made (with what ``tool_setup`` adds) at their first use: a
        server that is never asked for tools never imports them (docs/DESIGN.md, "Loading, sixth cut")."""
        tools = self._tools
        if tools is None:
            with self._tools_lock:
                tools = self._tools
                if tools is None:
                    from .tools import Tools

                    tools = Tools(self.resources, self.settings.page_size, self.budget)
                    for setup in self.tool_setup:
                        setup(tools)
                    self._tools = tools
        return tools

    @property
    def tools_made(self) -> Tools | None:
        """The tools if made already (what a session's end or a close has to tell them), else None."""
        return self._tools

    # -- running one request ------------------------------------------------------------
    def run(self, era: EraRules, ctx: Ctx, msg: rpc.Message, handler: Handler | None = None) -> dict[str, Any]:
        """The JSON-RPC reply to one request under ``era``'s rules (``handler`` overrides its table's)."""
        assert msg.method is not None and msg.id is not None
        handler = handler or era.methods.get(msg.method)
        if handler is None:
            return rpc.error(msg.id, RpcError(rpc.METHOD_NOT_FOUND, f"Method not found: {msg.method}"))
        try:
            check_params(msg.method, msg.params)
            value = handler(ctx, msg.params)
        except RpcError as err:
            return rpc.error(msg.id, err)
        except ResourceNotFound as exc:
            return rpc.error(msg.id, RpcError(era.not_found, str(exc), {"uri": exc.uri}))
        except InvalidResourceParams as exc:
            return rpc.error(msg.id, RpcError(rpc.INVALID_PARAMS, f"Invalid params: {exc}"))
        except ResourceReadError as exc:
            ctx.log("error", {"message": str(exc), "method": msg.method})
            return rpc.error(msg.id, RpcError(rpc.INTERNAL_ERROR, str(exc)))
        except Exception as exc:
            missing = missing_package(exc, msg.method)
            if missing is not None:
                return rpc.error(msg.id, RpcError(rpc.INTERNAL_ERROR, str(missing)))
            log.exception("%s failed", msg.method)
            return rpc.error(msg.id, RpcError(rpc.INTERNAL_ERROR, f"Internal error: {type(exc).__name__}: {exc}"))
        return rpc.result(msg.id, era.decorate(ctx, msg.method, value))

    @staticmethod
    def answer(ctx: Ctx, reply: dict[str, Any], session_id: str | None = None) -> Answer:
        """The reply, after this request's log messages when its peer takes them before a reply."""
        notes = []
        if ctx.logs and ctx.streams:
            notes = [
                rpc.notification("notifications/message", {"level": level, "logger": "mcp-notebook", "data": data})
                for level, data in ctx.logs
            ]
        return Answer(reply, notes=notes, session_id=session_id)

    def request(self, era: EraRules, ctx: Ctx, msg: rpc.Message, session_id: str | None = None) -> Answer:
        """One request's answer: listings and reads through their caches, the rest through ``run``."""
        if msg.method in LIST_METHODS:
            cached = self.list_reply(era, ctx, msg, session_id)
            if cached is not None:
                return cached
        elif msg.method == "resources/read":
            return self.read_reply(era, ctx, msg, session_id)
        return self.answer(ctx, self.run(era, ctx, msg), session_id)

    # -- listings from cached JSON ------------------------------------------------------
    def list_reply(self, era: EraRules, ctx: Ctx, msg: rpc.Message, session_id: str | None = None) -> Answer | None:
        """resources/list and templates/list from cached per-item JSON; None: take ``run``.

        Equivalent to ``answer(ctx, run(era, ctx, msg))`` for these methods (they never log), but
        every listed item is encoded once per provider state and revision, not once per request.
        """
        method = msg.method or ""
        try:
            check_params(method, msg.params)
            items = self.encoded_listing(method, ctx.version, ctx.apps)
            offset = decode_cursor(msg.params.get("cursor"))
        except Exception:  # errors are reported (and logged) by run()
            return None
        size = _fitting(items[offset : offset + self.settings.page_size], self.budget)
        rest: dict[str, Any] = {}
        if offset + size < len(items):
            rest["nextCursor"] = encode_cursor(offset + size)
        rest = era.decorate(ctx, method, rest)
        tail = b"," + rpc.dumps(rest)[1:] if rest else b"}"
        page = b",".join(items[offset : offset + size])
        body = b"".join((REPLY_START, rpc.dumps(msg.id), LIST_METHODS[method], page, b"]", tail, b"}"))
        return Answer(encoded=body, session_id=session_id)

    def encoded_listing(self, method: str, version: str, apps: bool = False) -> list[bytes]:
        """Every listed item of every provider as compact JSON, in listing order.

        A provider with a ``list_token()`` is re-listed only when its token or the resources'
        generation moves (both read before listing); any other provider is listed every time and
        its items are re-encoded only when they differ from the previous listing.
        """
        templates = method == "resources/templates/list"
        generation = self.resources.generation
        out: list[bytes] = []
        for provider in self.resources.providers():
            if provider.apps_only and not apps:
                continue
            key = (method, version, id(provider))
            entry = self._listings.get(key)
            token = None if templates else provider.list_token()
            if token is not None:
                token = (generation, token)
                if entry is not None and entry[0] == token:
                    out.extend(entry[2])
                    continue
                listed: list[Any] = provider.list_resources()
            else:
                listed = provider.list_templates() if templates else provider.list_resources()
                if entry is not None and entry[0] is None and entry[1] == listed:
                    out.extend(entry[2])
                    continue
            encoded = [rpc.dumps(item.to_json(version)) for item in listed]
            self._listings[key] = (token, listed if token is None else None, encoded)
            out.extend(encoded)
        return out

    # -- reads through the encoded-reply cache --------------------------------------------
    def read_reply(self, era: EraRules, ctx: Ctx, msg: rpc.Message, session_id: str | None = None) -> Answer:
        """resources/read, from the encoded reply of an earlier read while its stamp holds (only
        the id is spliced in); through ``run`` otherwise. The URI's provider is looked up once."""
        uri = msg.params.get("uri")
        provider = self.resources.owner(uri) if isinstance(uri, str) and len(uri) <= MAX_URI else None

        def read(ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
            return self.read_with(provider, ctx, params)

        stamp = self.read_stamp(provider, uri) if provider is not None else None
        if stamp is None or budget.scale_param(msg.params.get("_meta")) < 1:  # a front's scaled read: not cached
            return self.answer(ctx, self.run(era, ctx, msg, read), session_id)
        key = (ctx.version, uri)
        entry = self._read_cache.get(key)
        if entry is None or entry[0] != stamp:
            reply = self.run(era, ctx, msg, read)
            if "result" not in reply or ctx.logs:
                return self.answer(ctx, reply, session_id)
            entry = (stamp, b',"result":' + rpc.dumps(reply["result"]) + b"}", provider, uri)
            self._keep_read(key, entry)
        else:
            try:
                check_params("resources/read", msg.params)
            except RpcError:  # reported by run()
                return self.answer(ctx, self.run(era, ctx, msg, read), session_id)
        return Answer(encoded=REPLY_START + rpc.dumps(msg.id) + entry[1], session_id=session_id)

    def _keep_read(self, key: ReadKey, entry: CachedRead) -> None:
        """Cache ``entry`` under ``key`` and, for a plain URI, under its bytes (memory bounded:
        both cleared when the cache is full)."""
        if len(self._read_cache) >= READ_CACHE_SIZE:
            self._read_cache.clear()
            for index in list(self._plain_reads.values()):  # (a copy: another thread may add a revision)
                index.clear()
        self._read_cache[key] = entry
        raw = plain_bytes(key[1])
        if raw is not None:
            self.plain_reads(key[0])[raw] = entry

    def plain_reads(self, version: str) -> dict[bytes, CachedRead]:
        """The cached reads of plain URIs under ``version``, by the URI's bytes: the same entries as
        the read cache, one lookup from the bytes of a request (protocol/fast_read.py, families.py).
        The dict is cleared, never replaced, so a memo may keep it."""
        index = self._plain_reads.get(version)
        if index is None:
            index = self._plain_reads.setdefault(version, {})
        return index

    def fresh_tail(self, entry: CachedRead) -> bytes | None:
        """The encoded result tail of ``entry`` while its stamp holds, else None (``cached_read``'s
        check, for an entry found already; keep the two in step)."""
        try:
            token = entry[2].read_token(entry[3])
        except Exception:
            return None
        if token is None or entry[0] != (token, self.resources.generation, REDACTOR.version):
            return None
        return entry[1]

    def read_stamp(self, provider: Provider, uri: str) -> tuple[Hashable, ...] | None:
        """What a cached encoded read of ``uri`` must match to be served again: the provider's
        read token, the resources' generation (settings change in cells) and the redactor's
        version; None: reads of ``uri`` are not cached."""
        try:
            token = provider.read_token(uri)
        except Exception:
            return None
        return None if token is None else (token, self.resources.generation, REDACTOR.version)

    def cached_read(self, key: ReadKey) -> bytes | None:
        """The encoded result tail of a cached read still valid for ``key``, or None."""
        entry = self._read_cache.get(key)
        if entry is None:
            return None
        try:  # read_stamp, inlined: this runs for every cached read (the entry's own provider)
            token = entry[2].read_token(key[1])
        except Exception:
            return None
        if token is None or entry[0] != (token, self.resources.generation, REDACTOR.version):
            return None
        return entry[1]

    # -- handlers both eras serve ---------------------------------------------------------
    def ping(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def list_resources(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        return self._page(self.resources.list_resources(ctx.apps), params, "resources", ctx.version)

    def list_templates(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        return self._page(self.resources.list_templates(), params, "resourceTemplates", ctx.version)

    def read(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        return self.read_with(None, ctx, params)

    def read_with(self, provider: Provider | None, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        """The read's result within the budget: read again at a lower scale (a smaller page that names
        the next) while its serialized form is over. Exempt: the hub's own views (verbatim HTML, for
        the host to render) and images (hosts count them in tokens, not characters; cutting breaks them)."""
        uri = uri_param(params)

        def build() -> tuple[dict[str, Any], bool]:
            contents = self.resources.read(uri, provider)
            if not contents:
                raise ResourceNotFound(uri)
            exempt = any(c.verbatim or _image(c.blob, c.mime_type) for c in contents)
            return {"contents": [c.to_json(ctx.version) for c in contents]}, exempt

        def measure(built: tuple[dict[str, Any], bool]) -> int:
            return 0 if built[1] else budget.wire_chars(built[0])

        with budget.scaled_to(budget.scale_param(params.get("_meta"))):
            (result, _), size = budget.fit(build, self.budget, measure)
        if size > self.budget:  # a resource that does not page (a user's function): cut, and say so
            result = cut_contents(result, self.budget)
        return result

    def complete(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        ref = params.get("ref")
        arg = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(arg, dict):
            raise RpcError(rpc.INVALID_PARAMS, "Invalid params: ref and argument (objects) are required")
        name, value = arg.get("name"), arg.get("value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise RpcError(rpc.INVALID_PARAMS, "Invalid params: argument.name and argument.value must be strings")
        kind = ref.get("type")
        if kind == "ref/prompt":
            if not isinstance(ref.get("name"), str):
                raise RpcError(rpc.INVALID_PARAMS, "Invalid params: ref.name is required", {"param": "ref.name"})
            values: list[str] = []  # this server has no prompts
        elif kind == "ref/resource":
            template = ref.get("uri")
            if not isinstance(template, str):
                raise RpcError(rpc.INVALID_PARAMS, "Invalid params: ref.uri (string) is required")
            context = params.get("context") or {}
            known = context.get("arguments") if isinstance(context, dict) else None
            values = self.resources.complete(template, name, value, known if isinstance(known, dict) else {}) or []
        else:
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: unknown ref type {kind!r}")
        shown = _fitting([rpc.dumps(v) for v in values[:MAX_COMPLETIONS]], self.budget)  # long names: fewer
        return {"completion": {"values": values[:shown], "total": len(values), "hasMore": len(values) > shown}}

    def _page(self, items: list[Any], params: dict[str, Any], key: str, version: str) -> dict[str, Any]:
        offset = decode_cursor(params.get("cursor"))
        encoded = [item.to_json(version) for item in items[offset : offset + self.settings.page_size]]
        size = _fitting([rpc.dumps(e) for e in encoded], self.budget)
        out: dict[str, Any] = {key: encoded[:size]}
        if offset + size < len(items):
            out["nextCursor"] = encode_cursor(offset + size)
        return out

    # -- what the server says about itself ------------------------------------------------
    def capabilities(self, version: str, apps: bool = False) -> dict[str, Any]:
        """The server's capabilities; the Apps extension's entry only for a client that offered it."""
        caps: dict[str, Any] = {"resources": {"subscribe": True, "listChanged": True}, "tools": {}}
        if apps:
            caps["extensions"] = server_capability()
        if knows(version, "completions_capability"):
            caps["completions"] = {}
        if not knows(version, "stateless"):
            caps["logging"] = {}
        return caps

    def server_info(self, version: str) -> dict[str, Any]:
        s = self.settings
        info: dict[str, Any] = {"name": s.name, "version": s.version}
        if knows(version, "title"):
            info["title"] = s.title
        if knows(version, "icons"):
            info["description"] = s.description
        return info

    def touch(self) -> None:
        """Sessions or streams changed: tell on_activity and every activity listener (they must not block)."""
        callbacks = [self.on_activity] if self.on_activity is not None else []
        for callback in callbacks + list(self.activity_listeners):
            try:
                callback()
            except Exception:
                log.exception("activity callback failed")


def plain_bytes(uri: str) -> bytes | None:
    """The bytes of ``uri`` when it is plain (see ``PLAIN_BYTES``), else None."""
    if not uri or not uri.isascii() or uri[0] == "=":
        return None
    raw = uri.encode("ascii")
    return None if raw.translate(None, PLAIN_BYTES) else raw


def uri_param(params: dict[str, Any]) -> str:
    """The ``uri`` param, already checked by jsonrpc.check_params for every method that takes one."""
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise RpcError(rpc.INVALID_PARAMS, "Invalid params: uri (non-empty string) is required")
    return uri


def _fitting(encoded: list[bytes], limit: int) -> int:
    """How many of the encoded list items (from the first) fit ``limit`` (bytes are at least the
    characters sent); at least one, so a listing always moves on."""
    used = 200  # the list's key, its cursor, the era's fields
    for n, item in enumerate(encoded):
        used += len(item) + 1
        if used > limit:
            return max(1, n)
    return len(encoded)


def cut_contents(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """A read result cut to ``limit``: each text shares the room, and ends saying it was cut."""
    contents = result["contents"]
    skeleton = [{k: v for k, v in c.items() if k not in ("text", "blob")} for c in contents]
    room = max(100, (limit - budget.wire_chars({"contents": skeleton}) - 200) // max(1, len(contents)))
    out = []
    for item, bare in zip(contents, skeleton, strict=True):
        if "text" in item:
            note = f"\n… [cut at the hub's result budget: {len(item['text']):,} characters in all; this resource does not page]"
            out.append({**bare, "text": budget.cut_text(item["text"], room, note)})
        elif budget.wire_chars(item) <= room:
            out.append(item)
        else:
            out.append({**bare, "text": "[a binary resource over the result budget: not sent]"})
    return {**result, "contents": out}


def _image(blob: bytes | None, mime_type: str | None) -> bool:
    return blob is not None and (mime_type or "").startswith("image/")
