"""The URIs inside a kernel's replies, qualified with its label, and back (docs/DESIGN.md, "One
endpoint for every kernel", "Links").

A hub names its resources bare (``nb://frames/sales``); through the front a bare URI means the
*current* kernel, so every link a kernel's reply carries is rewritten to the kernel that answered
(``nb://kernels/analysis/frames/sales``), whatever the providers are, new ones included.

What counts as a link: a JSON string (inside a JSON contents text, a contents ``_meta``, a
completion value) that is *as a whole* a URI of that kernel: it starts with ``nb://`` (not
``nb://kernels``, already the front's) or ``{scheme}://`` for a scheme the kernel serves (its
listings; ``ui://`` is the front's own), with no whitespace or control character, and at most
``MAX_URI`` characters. Nothing else is touched: a repr holding ``'nb://vars/x'`` is not a whole
URI (it starts with a quote), dictionary keys are data, and texts that are not JSON (CSV,
markdown, text/plain) are left byte for byte. A user string that is exactly a URI of the kernel
(a frame cell holding ``nb://vars/x``) is read as the link it is and qualified too.

Inbound, the same URIs written qualified inside a request's URI (a query value such as
``?uri=nb%3A%2F%2Fkernels%2Fanalysis%2Fvars%2Fx``, what a qualified completion value fills in)
are turned back into the kernel's own before the request goes upstream.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from ..protocol.jsonrpc import MAX_URI
from .naming import KERNELS_URI, qualify, split

FRONT_SCHEMES = frozenset({"ui"})  # the MCP Apps views: the front serves them itself
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_UNSAFE = re.compile(r"[\x00-\x20\x7f]")
JSON_TYPES = ("application/json",)


def is_json(mime_type: str | None) -> bool:
    kind = (mime_type or "").split(";", 1)[0].strip().lower()
    return kind in JSON_TYPES or kind.endswith("+json")


def schemes_of(uris: list[str]) -> set[str]:
    """The URI schemes among ``uris`` (listed resources and templates of a kernel)."""
    out = set()
    for uri in uris:
        match = _SCHEME.match(uri)
        if match:
            out.add(match.group(1).lower())
    return out


class Linker:
    """Qualifies the links of one kernel (``label``) inside what it answered."""

    def __init__(self, label: str, schemes: frozenset[str] = frozenset()):
        self.label = label
        self.schemes = (frozenset({"nb"}) | {s.lower() for s in schemes}) - FRONT_SCHEMES
        self._needles = tuple(f"{s}://" for s in sorted(self.schemes))
        self._prefix = qualify(label, "nb://")  # nb://kernels/{label}/

    def uri(self, value: str) -> str | None:
        """The qualified form of ``value`` when it is a link of this kernel, else None."""
        if "://" not in value or len(value) > MAX_URI:  # most strings: one scan, no regex
            return None
        if value.startswith("nb://"):
            if value.startswith(KERNELS_URI) and value[len(KERNELS_URI) : len(KERNELS_URI) + 1] in ("", "/", "?"):
                return None
            return None if _UNSAFE.search(value) else self._prefix + value[5:]
        match = _SCHEME.match(value)
        if match is None or match.group(1).lower() not in self.schemes or _UNSAFE.search(value):
            return None
        return self._prefix + value

    def value(self, obj: Any) -> Any:
        """``obj`` (parsed JSON) with its links qualified; the same object when it holds none."""
        if isinstance(obj, str):
            found = self.uri(obj)
            return obj if found is None else found
        if isinstance(obj, list):
            changed = False
            new = []
            for v in obj:
                w = v if isinstance(v, (int, float, bool)) or v is None else self.value(v)
                changed |= w is not v
                new.append(w)
            return new if changed else obj
        if isinstance(obj, dict):
            out = {}
            changed = False
            for k, v in obj.items():
                w = v if isinstance(v, (int, float, bool)) or v is None else self.value(v)
                changed |= w is not v
                out[k] = w
            return out if changed else obj
        return obj

    def text(self, text: str | None, mime_type: str | None) -> str | None:
        """A contents text: a JSON document with its links qualified; any other text unchanged."""
        if not text or not is_json(mime_type) or not any(n in text for n in self._needles):
            return text
        try:
            doc = json.loads(text)
            new = self.value(doc)
            return text if new is doc else json.dumps(new, ensure_ascii=False)
        except (ValueError, RecursionError):  # not JSON after all, or nested deeper than Python walks
            return text


def unqualify(value: str, names: tuple[str, ...]) -> str:
    """A value a client fills into a kernel's template (a completion value it picked): this
    kernel's qualified URI becomes the kernel's own, as a whole or written inside."""
    parts = split(value)
    if parts is not None and parts[0] in names:
        value = parts[1]
    return unqualify_inside(value, names)


def unqualify_inside(inner: str, names: tuple[str, ...]) -> str:
    """``inner`` (a kernel's own URI) with this kernel's qualified URIs written inside it (raw, or
    percent-encoded as in a query value) turned back into the kernel's own."""
    if "kernels" not in inner:
        return inner
    head, sep, tail = inner.partition("://")
    for name in names:
        label = quote(name, safe="")
        for prefix, bare in (
            (f"nb://kernels/{label}/", "nb://"),
            (quote(f"nb://kernels/{label}/", safe=""), "nb%3A%2F%2F"),
        ):
            tail = _replace_prefix(tail, prefix, bare)
    return head + sep + tail


def _replace_prefix(text: str, prefix: str, bare: str) -> str:
    """Every ``prefix`` + rest in ``text`` as ``bare`` + rest, or as rest alone when rest is itself
    a whole other-scheme URI (``nb://kernels/a/app://x`` → ``app://x``); case-blind for %-escapes."""
    pattern = re.compile(re.escape(prefix), re.IGNORECASE if "%" in prefix else 0)
    encoded = "%" in prefix

    def repl(match: re.Match[str]) -> str:
        rest = text[match.end() :]
        other = re.match(r"[A-Za-z][A-Za-z0-9+.-]*(%3A%2F%2F|://)", rest, re.IGNORECASE if encoded else 0)
        return "" if other else bare

    return pattern.sub(repl, text)
