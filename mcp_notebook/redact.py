"""Secrets: names that look like credentials, values that look like keys, the redactor that masks
them wherever text leaves the hub, and which variables are therefore hidden (``ExposureRules``:
the variables provider's exposure, with the name filter of the hub's settings)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, MutableMapping
from types import ModuleType
from typing import Any

from .lazy_re import LazyPatterns

# A name is secret-looking when one of its words (split at _, -, digits and camelCase) is one
# of these, or when it contains one of the compound forms (``openaiapikey``, ``dbPassword``).
DEFAULT_SECRET_WORDS: tuple[str, ...] = (
    "key",
    "keys",
    "apikey",
    "token",
    "tokens",
    "secret",
    "secrets",
    "password",
    "passwords",
    "passwd",
    "pwd",
    "passphrase",
    "credential",
    "credentials",
    "creds",
    "auth",
    "bearer",
    "cookie",
    "cookies",
    "privatekey",
    "signature",
    "authorization",
)
_COMPOUNDS = ("apikey", "secret", "password", "passwd", "credential", "privatekey", "accesskey", "authtoken")
_WORD = r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+"

# Well-known credential shapes. Kept specific, so ordinary data is not masked. Every branch starts
# with a literal character (the word-boundary check comes right after it, as a lookbehind), so the
# regex engine skips ahead in C to the few characters that can start a match.
_SECRET_VALUE = "|".join(
    (
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)",
        r"s(?<![^\W_]s)k-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic
        r"g(?<![^\W_]g)h[pousr]_[A-Za-z0-9]{30,}",  # GitHub
        r"g(?<![^\W_]g)ithub_pat_[A-Za-z0-9_]{40,}",
        r"A(?<![^\W_]A)KIA[0-9A-Z]{16}\b",  # AWS access key id
        r"A(?<![^\W_]A)Iza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])",  # Google
        r"x(?<![^\W_]x)ox[abposre]-[A-Za-z0-9\-]{10,}",  # Slack
        r"h(?<![^\W_]h)f_[A-Za-z0-9]{30,}",  # Hugging Face
        r"e(?<![^\W_]e)yJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JWT
    )
)
SHORTEST_SHAPE = 15  # the fewest characters a shape above matches (Slack's "xoxb-" and 10): names are shorter
MASK = "[REDACTED]"


class NameFilter:
    """Decides from a name alone whether a variable may be exposed."""

    def __init__(self, secret_words: Iterable[str], include: Iterable[str], exclude: Iterable[str]):
        self._words = frozenset(w.lower() for w in secret_words)
        self._include = _compile(include)
        self._exclude = _compile(exclude)

    def looks_secret(self, name: str) -> bool:
        if not self._words:
            return False
        compact = name.lower().replace("_", "").replace("-", "")
        if any(c in compact for c in _COMPOUNDS):
            return True
        return any(w.lower() in self._words for w in _NAMES.word.findall(name))

    def allowed(self, name: str) -> bool:
        if self._exclude is not None and self._exclude.fullmatch(name):
            return False
        if self._include is not None and self._include.fullmatch(name):
            return True
        return not self.looks_secret(name)


def _compile(patterns: Iterable[str]) -> re.Pattern[str] | None:
    patterns = [p for p in patterns if p]
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def contains_secret(text: str) -> bool:
    """Whether ``text`` contains a well-known credential shape."""
    return len(text) >= SHORTEST_SHAPE and _RE.secret_value.search(text) is not None


def mask_secrets(text: str) -> str:
    """Mask credential shapes, the exact values the hub hides, and literals assigned to secret names."""
    return REDACTOR.mask(text)


# Literals assigned to (or keyed by) a secret-looking name: ``db_password = "x"``, ``"api_key": "x"``,
# ``password="x"`` in a call or signature, ``os.environ["TOKEN"] = 'x'``, ``TOKEN: str = "x"``; quotes
# may be JSON-escaped (``\"``) when the text is already JSON. Found from the operator (rarer than
# names), then the name is read backwards. Only the operator is consumed, so the scan goes on inside
# the literal. Unquoted values only in environment forms (``%env NAME=value``, ``export NAME=value``,
# ``NAME=value`` at the start of a line).
_OP_LITERAL = r"[=:](?=[ \t]*(?:[rRbBuUfF]{1,2})?(\\?[\"'])((?:(?!\1)[^\n]){3,}?)\1)"
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_ANNOTATION_CHARS = _IDENT_CHARS | frozenset(".[], |")
_ENV_ASSIGN = r"=([^\s'\"\\=]{3,})"
_ENV_PREFIXES = ("%env ", "%set_env ", "export ", "%env\t", "export\t")
MIN_EXACT = 6  # hidden values shorter than this are not masked by value (too many false positives)
MAX_EXACT_CHARS = 4096  # longer values are not remembered (credential shapes still apply)
MAX_EXACT = 4096  # most exact values remembered (oldest dropped first)
# Compiled at the first mask (~0.7 ms) or name check (~0.1 ms), not at import: the after-load thread
# compiles them (lazy_re.compile_all), and a read before it compiles them itself: masking is never skipped.
_RE = LazyPatterns(secret_value=_SECRET_VALUE, op_literal=_OP_LITERAL, env_assign=_ENV_ASSIGN)
_NAMES = LazyPatterns(word=_WORD)  # loading checks the names already bound (VariablesProvider.rebuild)


class Redactor:
    """Masks text on its way out of the hub: one precompiled regex per kind of match.

    Three kinds: credential shapes (``_SECRET_VALUE``); the exact values the hub hides (strings of
    hidden variables, the hub's own token), registered with :meth:`add` and compiled into one
    trie-shaped alternation that is rebuilt only when the set changes (``version`` moves with it, so
    cached renderings can tell); and literals assigned to secret-looking names in sources and reprs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, None] = {}  # an insertion-ordered set
        self.version = 0
        self._name_check: Callable[[str], bool] = NameFilter(DEFAULT_SECRET_WORDS, (), ()).looks_secret
        self._name_cache: dict[str, bool] = {}
        self._regex = self._build()

    def add(self, values: Iterable[str]) -> None:
        """Remember exact values to mask from now on (every textual form: raw, JSON- and repr-escaped)."""
        new = []
        for value in values:
            if not isinstance(value, str) or not MIN_EXACT <= len(value) <= MAX_EXACT_CHARS or MASK in value:
                continue
            new.extend(form for form in _forms(value) if form not in self._values)
        if not new:
            return
        with self._lock:
            for form in new:
                self._values[form] = None
            while len(self._values) > MAX_EXACT:
                del self._values[next(iter(self._values))]
            self._regex = self._build()
            self.version += 1

    def set_name_check(self, check: Callable[[str], bool]) -> None:
        """Which names count as secret for assigned literals (the hub's configured name filter)."""
        self._name_check = check
        self._name_cache = {}

    def looks_secret(self, name: str) -> bool:
        cache = self._name_cache
        hit = cache.get(name)
        if hit is None:
            if len(cache) > 10_000:
                cache.clear()
            hit = cache[name] = bool(self._name_check(name))
        return hit

    def _build(self) -> re.Pattern[str] | None:
        return re.compile(_alternation(list(self._values))) if self._values else None

    def mask(self, text: str) -> str:
        """``text`` with every secret replaced by ``[REDACTED]``."""
        if not text:
            return text
        spans = [m.span() for m in _RE.secret_value.finditer(text)]
        exact = self._regex
        if exact is not None:
            spans += [m.span() for m in exact.finditer(text)]
        looks_secret = self.looks_secret
        for m in _RE.op_literal.finditer(text):
            if m.group(2) == MASK:
                continue
            key = _key_before(text, m.start())
            if key and looks_secret(key):
                spans.append(m.span(2))
        for m in _RE.env_assign.finditer(text):
            key = _env_key_before(text, m.start())
            if key and looks_secret(key):
                spans.append(m.span(1))
        if not spans:
            return text
        spans.sort()
        out: list[str] = []
        pos = 0
        for start, end in spans:
            if end <= pos:
                continue
            if start > pos or not out:
                out.append(text[pos:start])
                out.append(MASK)
            pos = end  # an overlapping span extends the previous mask
        out.append(text[pos:])
        return "".join(out)

    def mask_obj(self, value: Any, depth: int = 0) -> Any:
        """A masked copy of a small JSON-like value (``_meta``): strings masked, the rest kept."""
        if isinstance(value, str):
            return self.mask(value)
        if depth > 8:
            return value
        if isinstance(value, dict):
            return {k: self.mask_obj(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.mask_obj(v, depth + 1) for v in value]
        return value


# Secret words that, alone, also name everyday things (``for key in d``, ``for token in words``).
_GENERIC_WORDS = frozenset({"key", "keys", "token", "tokens", "auth", "bearer", "cookie", "cookies", "signature"})


def clearly_secret_name(name: str) -> bool:
    """A name that says "secret" beyond doubt: several words (``db_password``, ``OPENAI_API_KEY``) or
    an unambiguous word (``password``, ``secret``); not a bare ``key`` or ``token``."""
    words = _NAMES.word.findall(name)
    return len(words) != 1 or words[0].lower() not in _GENERIC_WORDS


def hidden_strings(value: Any, limit: int = 64, sure: bool = True) -> list[str]:
    """Strings of a hidden value to mask wherever they appear: the value itself when it is a string
    (``sure=False``, for a bare ``key = "city"``: only when token-like); inside builtin containers
    (three levels, ``limit`` items), the values under secret-looking keys and token-like strings (no
    spaces, letters and digits), not every word (``keys = ["city"]``). Never runs user code:
    subclasses are read through the builtin methods."""
    out: list[str] = []
    stack: list[tuple[Any, int, bool]] = [(value, 0, sure)]
    while stack and len(out) < limit:
        item, depth, sure = stack.pop()
        if isinstance(item, (bytes, bytearray)):
            item = bytes(item[: MAX_EXACT_CHARS + 1]).decode("utf-8", "replace")
        if isinstance(item, str):
            if len(item) >= MIN_EXACT and (sure or _token_like(item)):
                out.append(str.__str__(item))
            continue
        if depth >= 3:
            continue
        if isinstance(item, dict):
            for n, (k, v) in enumerate(dict.items(item)):
                if n >= limit:
                    break
                stack.append((v, depth + 1, isinstance(k, str) and REDACTOR.looks_secret(k)))
            continue
        if isinstance(item, list):
            children: Any = list.__iter__(item)
        elif isinstance(item, tuple):
            children = tuple.__iter__(item)
        elif isinstance(item, frozenset):
            children = frozenset.__iter__(item)
        elif isinstance(item, set):
            children = set.__iter__(item)
        else:
            continue
        for n, child in enumerate(children):
            if n >= limit:
                break
            stack.append((child, depth + 1, False))
    return out


def _token_like(text: str) -> bool:
    return (
        len(text) >= 8
        and not any(c.isspace() for c in text)
        and any(c.isdigit() for c in text)
        and any(c.isalpha() for c in text)
    )


def _env_key_before(text: str, end: int) -> str:
    """``NAME`` of ``NAME=value`` at the start of a line (or a JSON-escaped line), after %env or export."""
    i = end
    while i > 0 and text[i - 1] in _IDENT_CHARS and end - i < 100:
        i -= 1
    name = text[i:end]
    if not name or i == 0 or text[i - 1] in "\n\"'":
        return name
    if text[i - 2 : i] == "\\n" or text.endswith(_ENV_PREFIXES, max(0, i - 9), i):
        return name
    return ""


def _key_before(text: str, end: int) -> str:
    """The name an operator at ``end`` assigns to: ``name =``, ``"name":``, ``["name"] =``, ``name: T =``."""
    i = end
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    if i > 0 and text[i - 1] == ":" and end < len(text) and text[end] == "=":  # walrus
        i -= 1
    if i > 0 and text[i - 1] == "]":
        i -= 1
    if i > 0 and text[i - 1] in "\"'":
        i -= 1
        if i > 0 and text[i - 1] == "\\":
            i -= 1
    stop = i
    while i > 0 and text[i - 1] in _IDENT_CHARS and stop - i < 100:
        i -= 1
    name = text[i:stop]
    if text[end] == "=" and name and i > 0:  # perhaps an annotation: ``name: T = "x"``
        j = i
        while j > 0 and text[j - 1] in _ANNOTATION_CHARS and i - j < 40:
            j -= 1
        k = j
        while k > 0 and text[k - 1] in " \t":
            k -= 1
        if k > 0 and text[k - 1] == ":":
            k -= 1
            while k > 0 and text[k - 1] in " \t":
                k -= 1
            head = k
            while head > 0 and text[head - 1] in _IDENT_CHARS and k - head < 100:
                head -= 1
            if head < k:
                return text[head:k]
    return name


def _forms(value: str) -> list[str]:
    """The value as it may appear in text: raw, JSON-escaped, repr-escaped (without the quotes)."""
    out = [value]
    for form in (json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1], repr(value)[1:-1]):
        if form not in out:
            out.append(form)
    return out


def _alternation(words: list[str]) -> str:
    """One alternation for many literals, shaped as a trie: shared prefixes are matched once."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any], depth: int) -> str:
        out = []
        while True:  # chains of single children without recursion
            keys = [k for k in node if k]
            if len(keys) == 1 and "" not in node:
                out.append(re.escape(keys[0]))
                node = node[keys[0]]
                continue
            if not keys:
                return "".join(out)
            if depth > 200:
                raise RecursionError
            body = "(?:" + "|".join(re.escape(k) + emit(node[k], depth + 1) for k in sorted(keys)) + ")"
            return "".join(out) + (body + "?" if "" in node else body)

    try:
        return emit(trie, 0)
    except RecursionError:
        return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


REDACTOR = Redactor()


# -- which variables are exposed ----------------------------------------------------------------
_SECRET_SCAN_CHARS = 8192  # a string variable holding a credential shape in its first 8 KB is hidden
_MAX_VERDICTS = 200_000  # names whose rule verdict is remembered (then forgotten all at once)


class ConfiguredNames:
    """The name filter of the hub's settings (secret words, include and exclude patterns), rebuilt
    when they change (``%config`` while the hub runs); the redactor's name check follows it."""

    def __init__(self, config: Any):
        self._config = config
        self._cache: tuple[tuple, NameFilter] | None = None
        self._seen: tuple[int, NameFilter] | None = None  # (settings version, filter): no rebuild to check

    def __call__(self) -> NameFilter:
        cfg = self._config
        version = getattr(cfg, "settings_version", None)  # budget.Limits counts changes of the settings
        seen = self._seen
        if seen is not None and version is not None and seen[0] == version:
            return seen[1]  # once per cell: no three tuples to build and compare
        key = (tuple(cfg.secret_words), tuple(cfg.include_names), tuple(cfg.exclude_names))
        cached = self._cache
        if cached is None or cached[0] != key:
            cached = self._cache = (key, NameFilter(*key))
            REDACTOR.set_name_check(cached[1].looks_secret)
        if isinstance(version, int):
            self._seen = (version, cached[1])
        return cached[1]


class ExposureRules:
    """Which names the hub exposes: not IPython's own, modules, names the user hid (``%mcp hide``),
    names the rules call secret, or strings with a credential's shape; what is hidden is remembered
    so its strings are masked wherever text leaves the hub."""

    def __init__(self, hidden_ns: MutableMapping[str, Any], name_filter: Callable[[], NameFilter]):
        self._hidden_ns = hidden_ns
        self._filter = name_filter
        self.user_hidden: set[str] = set()
        # What the name rules say of each name seen (the rules' verdict depends on the name alone),
        # for the filter it was decided by: a rebound name costs a dict lookup, not ~20 calls a cell.
        self._verdicts: dict[str, bool] = {}
        self._verdicts_of: NameFilter | None = None

    def _name_allowed(self, name: str) -> bool:
        rules = self._filter()
        verdicts = self._verdicts
        if rules is not self._verdicts_of or len(verdicts) > _MAX_VERDICTS:
            verdicts.clear()
            self._verdicts_of = rules
        verdict = verdicts.get(name)
        if verdict is None:
            verdict = verdicts[name] = rules.allowed(name) and not contains_secret(name)
        return verdict

    def exposable(self, name: str, value: Any) -> bool:
        if name.startswith("_") or name in self.user_hidden:
            return False
        if name in self._hidden_ns and self._hidden_ns[name] is value:
            return False
        if isinstance(value, ModuleType):
            return False
        names = self._filter
        seen = getattr(names, "_seen", None)  # ConfiguredNames: its filter still the settings' one?
        if seen is not None and seen[1] is self._verdicts_of and seen[0] == names._config.settings_version:
            verdict = self._verdicts.get(name)  # the usual rebound name: no call (issue #48)
            if verdict is None:
                verdict = self._name_allowed(name)
        else:
            verdict = self._name_allowed(name)
        if not verdict:
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
