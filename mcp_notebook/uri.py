"""RFC 6570 URI templates: expansion and matching for the operators resource URIs use.

Supported expressions: ``{var}`` (one segment), ``{+var}`` (reserved: may span ``/``),
``{/var}`` (optional path segment), ``{?a,b}`` and ``{&a,b}`` (query). Matching is the inverse
of expansion: it returns the variables (percent-decoded), or None when the URI does not fit.
Query expressions accept parameters in any order; unknown query parameters are returned too, so
that a provider can reject them with a clear message instead of a bare "not found".
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import parse_qsl, quote, unquote

_EXPR = re.compile(r"\{([+#./;?&]?)([A-Za-z0-9_.,%*:]+)\}")
_SUPPORTED_OPS = {"", "+", "/", "?", "&"}


class TemplateError(ValueError):
    """The template string is not one this module can expand and match."""


class UriTemplate:
    """A parsed template (made by :func:`compile_template`, not changed afterwards): equal and
    hashed by its text, which determines the rest. Its regular expression is compiled at the first
    match (most templates are parsed at import, when the hub loads, and many are never matched)."""

    __slots__ = ("_regex", "optional_path_vars", "path_vars", "pattern", "query_vars", "template")

    def __init__(
        self,
        template: str,
        pattern: str,  # the regular expression a matching URI fits (whole)
        path_vars: tuple[str, ...],
        query_vars: tuple[str, ...],
        optional_path_vars: tuple[str, ...] = (),  # ``{/var}``: a URI may leave the segment out
    ) -> None:
        self.template = template
        self.pattern = pattern
        self._regex: re.Pattern[str] | None = None
        self.path_vars = path_vars
        self.query_vars = query_vars
        self.optional_path_vars = optional_path_vars

    def __eq__(self, other: object) -> bool:
        return self.template == other.template if type(other) is UriTemplate else NotImplemented

    def __hash__(self) -> int:
        return hash(self.template)

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"

    @property
    def regex(self) -> re.Pattern[str]:
        """The compiled pattern (compiled once; two threads racing compile the same thing)."""
        regex = self._regex
        if regex is None:
            regex = self._regex = re.compile(self.pattern)
        return regex

    @property
    def optional(self) -> tuple[str, ...]:
        """The variables a matching URI may leave out (optional path segments, query parameters)."""
        return self.optional_path_vars + self.query_vars

    @property
    def variables(self) -> tuple[str, ...]:
        return self.path_vars + self.query_vars

    def match(self, uri: str) -> dict[str, str] | None:
        """Variables of ``uri`` when it fits this template, else None."""
        m = (self._regex or self.regex).fullmatch(uri)
        if m is None:
            return None
        out: dict[str, str] = {}
        for name in self.path_vars:
            value = m.group(_group(name))
            if value is not None:
                out[name] = unquote(value)
        if self.query_vars:
            query = m.group("_query")
            if query:
                for key, value in parse_qsl(query, keep_blank_values=True):
                    out[key] = value
        return out

    def expand(self, values: dict[str, object]) -> str:
        """Fill the template; None values are left out."""

        def fill(m: re.Match[str]) -> str:
            op, names = m.group(1), m.group(2).split(",")
            present = [(n, values.get(n)) for n in names if values.get(n) is not None]
            if not present:
                return ""
            if op == "":
                return ",".join(quote(str(v), safe="") for _, v in present)
            if op == "+":
                return ",".join(quote(str(v), safe="/:@!$&'()*+,;=") for _, v in present)
            if op == "/":
                return "".join("/" + quote(str(v), safe="") for _, v in present)
            lead = "?" if op == "?" else "&"
            return lead + "&".join(f"{n}={quote(str(v), safe='')}" for n, v in present)

        return _EXPR.sub(fill, self.template)


@lru_cache(maxsize=4096)
def _group(name: str) -> str:
    """The regex group name of a template variable (cached: matching runs on every read)."""
    return "v_" + re.sub(r"\W", "_", name)


@lru_cache(maxsize=1024)
def compile_template(template: str) -> UriTemplate:
    """Parse a template once (cached)."""
    pattern: list[str] = []
    path_vars: list[str] = []
    query_vars: list[str] = []
    optional_vars: list[str] = []
    pos = 0
    for m in _EXPR.finditer(template):
        pattern.append(re.escape(template[pos : m.start()]))
        pos = m.end()
        op, names = m.group(1), m.group(2).split(",")
        if op not in _SUPPORTED_OPS or any(("*" in n or ":" in n or not n) for n in names):
            raise TemplateError(f"unsupported URI template expression {m.group(0)!r} in {template!r}")
        if op in ("?", "&"):
            if query_vars:
                raise TemplateError(f"only one query expression is supported in {template!r}")
            if template[m.end() :]:
                raise TemplateError(f"a query expression must end the template {template!r}")
            query_vars.extend(names)
            pattern.append(r"(?:[?&](?P<_query>[^#]*))?")
            continue
        if len(names) != 1:
            raise TemplateError(f"one variable per path expression, got {m.group(0)!r}")
        name = names[0]
        if name in path_vars:
            raise TemplateError(f"variable {name!r} appears twice in {template!r}")
        path_vars.append(name)
        group = _group(name)
        if any(_group(known) == group for known in path_vars[:-1]):  # "a.b" and "a_b": one group name
            raise TemplateError(f"variables {name!r} and another of {template!r} are too alike")
        if op == "":
            pattern.append(rf"(?P<{group}>[^/?#]+)")
        elif op == "+":
            pattern.append(rf"(?P<{group}>[^?#]+)")
        else:  # "/"
            optional_vars.append(name)
            pattern.append(rf"(?:/(?P<{group}>[^/?#]+))?")
    rest = template[pos:]
    if "{" in rest or "}" in rest:
        raise TemplateError(f"unbalanced braces in URI template {template!r}")
    pattern.append(re.escape(rest))
    return UriTemplate(template, "".join(pattern), tuple(path_vars), tuple(query_vars), tuple(optional_vars))


def is_template(text: str) -> bool:
    """True when ``text`` contains a template expression."""
    return "{" in text
