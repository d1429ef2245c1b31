"""Nothing secret in any log of the service, whoever writes it (the service, authlib, tornado,
JupyterHub's client library), at any level.

The service never logs a secret on purpose; this filter, on every handler of the process, is the
net under the libraries: tornado names a failed request by its full URL (``oauth_callback?code=…``),
authlib and JupyterHub's client log requests at DEBUG. It rewrites a record's text (and its
traceback) with URL parameters and ``Authorization`` values that carry secrets, the service's own
tokens (``mcpnb_at_…``, ``mcpnb_rt_…``) and long hex runs (JupyterHub's tokens, session ids and
their hashes), and quoted values a few words after a secret's name, replaced by ``[secret]``.
"""

from __future__ import annotations

import logging
import re

_PARAMS = re.compile(
    r"(?i)\b(code|state|token|access_token|refresh_token|client_secret|code_verifier|code_challenge|_xsrf|"
    r"pending|csrf|id_token)=([^&\s'\"<>]+)"
)
_FIELDS = re.compile(
    r"(?i)(['\"](?:code|state|token|access_token|refresh_token|client_secret|code_verifier|_xsrf|csrf|"
    r"jupyterhub_token|api_token)['\"]\s*:\s*['\"])([^'\"]+)"
)
# a quoted value a few words after a secret's name ("oauth state argument 'X' != cookie …='Y'")
_NAMED_QUOTED = re.compile(
    r"(?i)\b(state|code|token|secret|verifier|cookie|password)\b([^'\"\n]{0,40}?)(['\"])([^'\"\n]{4,})\3"
)
_AUTHORIZATION = re.compile(r"(?i)\b((?:token|bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}")
_OURS = re.compile(r"mcpnb_(?:at|rt)_[A-Za-z0-9_-]+")
_HEX = re.compile(r"(?i)(?<![0-9a-f])[0-9a-f]{32,}(?![0-9a-f])")
_LONG_URLSAFE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{40,}(?![A-Za-z0-9_-])")
MARK = "[secret]"


def redact(text: str) -> str:
    """``text`` with every secret-looking value replaced."""
    text = _PARAMS.sub(lambda m: f"{m.group(1)}={MARK}", text)
    text = _FIELDS.sub(lambda m: m.group(1) + MARK, text)
    for _ in range(4):  # a line may name several ("state 'X' != cookie 'Y'")
        text, found = _NAMED_QUOTED.subn(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{MARK}{m.group(3)}", text)
        if not found:
            break
    text = _AUTHORIZATION.sub(lambda m: m.group(1) + MARK, text)
    text = _OURS.sub(MARK, text)
    text = _HEX.sub(MARK, text)
    return _LONG_URLSAFE.sub(MARK, text)


class RedactSecrets(logging.Filter):
    """Rewrites each record that passes a handler (message, arguments and traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: say so rather than print its arguments
            message = f"(unformattable log record from {record.name})"
        clean = redact(message)
        if clean != message or record.args:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def install(*loggers: logging.Logger) -> None:
    """The filter on every handler of the root logger and of ``loggers`` (once each)."""
    for logger in (logging.getLogger(), *loggers):
        for handler in logger.handlers:
            if not any(isinstance(f, RedactSecrets) for f in handler.filters):
                handler.addFilter(RedactSecrets())
