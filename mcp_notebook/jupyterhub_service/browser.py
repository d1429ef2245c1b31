"""What the service asks of a browser, so that no page on JupyterHub's shared origin acts for the
person signed in.

Without per-user subdomains every user's server serves pages on JupyterHub's origin; such a page
is same-origin with the service's sign-in pages. So the sign-in pages (authorize, JupyterHub's
callback, consent) open only as a top-level document (``Sec-Fetch-Mode: navigate``,
``Sec-Fetch-Dest: document``: never fetched, never framed), are sent with
``Cross-Origin-Opener-Policy: same-origin`` (a popup a page opened loses its handle on them) and
``frame-ancestors 'none'``, and the consent's answer counts only as a click on that page
(``Sec-Fetch-Site: same-origin`` and ``Sec-Fetch-User: ?1`` too). Browsers send ``Sec-Fetch-*``
only to secure origins (https, or loopback): over plain http elsewhere they send none, and the
service says at start what is lost (``plain_http_warning``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
NOT_A_PAGE = (
    "This sign-in page opens only as a page of its own, from your assistant: not in a frame and not "
    "fetched by another page. Nothing was granted."
)
NOT_A_CLICK = "The answer did not come from a click on the consent page itself: nothing was granted."
NO_FETCH_METADATA = (
    "Your browser did not say how this page was opened (Sec-Fetch headers): the service accepts "
    "consent only from browsers that do, over https."
)


def _fetch(headers: Mapping[str, str]) -> dict[str, str | None]:
    return {k: headers.get(f"Sec-Fetch-{k}") for k in ("Site", "Mode", "Dest", "User")}


def page_problem(headers: Mapping[str, str], secure: bool) -> str | None:
    """Why a GET of a sign-in page is refused (None: a top-level navigation, or a browser that
    sends no fetch metadata on a plain-http deployment)."""
    f = _fetch(headers)
    if f["Mode"] is None and f["Dest"] is None:
        return NO_FETCH_METADATA if secure else None
    if f["Mode"] != "navigate" or f["Dest"] != "document":
        return NOT_A_PAGE
    return None


def answer_problem(headers: Mapping[str, str], secure: bool) -> str | None:
    """Why the consent's answer (a POST) is refused: it must be the user's own click on the page."""
    f = _fetch(headers)
    if all(v is None for v in f.values()):
        return NO_FETCH_METADATA if secure else None
    if f["Mode"] != "navigate" or f["Dest"] != "document" or f["Site"] != "same-origin":
        return NOT_A_PAGE
    if f["User"] != "?1":
        return NOT_A_CLICK
    return None


def consent_cookie(secure: bool) -> tuple[str, dict[str, Any]]:
    """The consent cookie's name and attributes: ``__Host-`` and ``Secure`` over https. A
    ``__Host-`` cookie has the path ``/``, so on a shared origin every user's server receives it:
    its value is a nonce that binds the browser, never the pending request's id."""
    if secure:
        return "__Host-mcp-notebook-consent", {"path": "/", "secure": True, "httponly": True, "samesite": "Lax"}
    return "mcp-notebook-consent", {"httponly": True, "samesite": "Lax"}


def plain_http_warning(public: str) -> str | None:
    """What the service says at start when its public URL is plain http on a non-loopback host."""
    if public.startswith("https://"):
        return None
    host = public.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
    if host in ("127.0.0.1", "localhost", "::1"):
        return None
    return (
        f"mcp-notebook: the public URL {public} is plain http: browsers send no Sec-Fetch headers there, so "
        "the service cannot tell a click on its consent page from a script of another page on the same origin "
        "(another user's server), and its cookies cannot be __Host-/Secure; tokens also cross the network in "
        "clear. Serve JupyterHub over https (and ideally with per-user subdomains, c.JupyterHub.subdomain_host)."
    )
