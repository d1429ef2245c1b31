"""The mcp-notebook scope of JupyterHub: a token that carries it reaches this extension's MCP
routes, and nothing else of the single-user server.

The JupyterHub service holds, for each signed-in user, a JupyterHub token with this custom scope
(``JUPYTERHUB_SCOPE``, filtered to the user) and ``read:servers!user``, never ``access:servers``.
JupyterHub's own authentication of the single-user server refuses such a token everywhere (it
wants ``access:servers``); the MCP routes check it themselves, here: from the ``Authorization``
header only (never a cookie or a URL), asked of JupyterHub (cached as JupyterHub's own checks
are), and only for this server (``!server=user/name``, which ``!user=user`` covers).
"""

from __future__ import annotations

import os
import re
from typing import Any

from jupyter_server.auth.authorizer import Authorizer

from ..protocol.security import JUPYTERHUB_SCOPE

_HEADER = re.compile(r"(?:token|bearer)\s+(\S+)\s*$", re.IGNORECASE)


def required_scope() -> str:
    """The scope a token needs for this server (its owner and name from JupyterHub's environment)."""
    user = os.environ.get("JUPYTERHUB_USER", "")
    return f"{JUPYTERHUB_SCOPE}!server={user}/{os.environ.get('JUPYTERHUB_SERVER_NAME', '')}"


async def scope_user(handler: Any) -> Any | None:
    """The JupyterHub user of a request whose ``Authorization`` token carries the mcp-notebook
    scope for this server; None when the server is not JupyterHub's, there is no such header, or
    the token lacks the scope (the server's own authentication then decides, as for any request)."""
    hub_auth = getattr(getattr(handler, "identity_provider", None), "hub_auth", None)
    found = _HEADER.match(handler.request.headers.get("Authorization", ""))
    if hub_auth is None or found is None or not os.environ.get("JUPYTERHUB_USER"):
        return None
    model = await hub_auth.user_for_token(found.group(1), sync=False)
    if not model or not hub_auth.check_scopes({required_scope()}, model):
        return None
    from jupyterhub.singleuser.extension import JupyterHubUser

    return JupyterHubUser(model)


class ScopeAuthorizer(Authorizer):
    """What a request admitted by the mcp-notebook scope may do: the MCP routes' reads and pipes
    (the routes that admit it are the only ones that ever ask this authorizer)."""

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        return resource == "kernels" and action in ("read", "execute")


SCOPE_AUTHORIZER = ScopeAuthorizer()
