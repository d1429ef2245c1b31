"""Secret detection: names that look like credentials, and values that look like keys."""

from __future__ import annotations

import re
from collections.abc import Iterable

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
)
_COMPOUNDS = ("apikey", "secret", "password", "passwd", "credential", "privatekey", "accesskey", "authtoken")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Well-known credential shapes. Kept specific, so ordinary data is not masked.
_SECRET_VALUE = re.compile(
    "|".join(
        (
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)",
            r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic
            r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{40,}",
            r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
            r"\bAIza[0-9A-Za-z_\-]{35}\b",  # Google
            r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JWT
        )
    )
)
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
        return any(w.lower() in self._words for w in _WORD.findall(name))

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
    return _SECRET_VALUE.search(text) is not None


def mask_secrets(text: str) -> str:
    """Replace anything that looks like a credential with a marker."""
    return _SECRET_VALUE.sub(MASK, text)
