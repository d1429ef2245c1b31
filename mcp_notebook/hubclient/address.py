"""Where a hub is and what reaches it: :class:`HubAddress` (a URL and token, or a :class:`HubRoute`)
and :class:`Link`, the surface the bridge drives, message by message (``bridge.http_link.Upstream``
over HTTP, the stdio carrier in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, Protocol

from ..protocol.wire_stateless import request_headers
from ..revisions import STATELESS_VERSIONS
from ..runtime import HubRecord
from .rules import HUB_SCHEME, Endpoint, authorization

VERSION = STATELESS_VERSIONS[-1]


class HubRoute(Protocol):
    """Another way to a hub than HTTP (the server extension's control channel, the stdio carrier's
    ``--channel``): one exchange at a time, usable from any thread or loop."""

    def call(self, headers: dict[str, str], body: bytes, timeout: float) -> tuple[int, str, bytes]:
        """POST and read the whole reply: status, content type, body (from a thread, not a loop)."""
        ...

    async def open(self, headers: dict[str, str], body: bytes, timeout: float) -> Any:
        """POST; the reply once its status is known (``status``, ``chunks()``, ``close()``)."""
        ...


class Replied(NamedTuple):
    """A link's answer to one message: its status (over HTTP the reply's; in-process the HTTP face's
    equivalent: 200, 202 nothing owed, 404 the session is gone), the session it names, and the
    JSON-RPC messages it carries (notifications first, then the reply)."""

    status: int
    session_id: str | None
    messages: list[Any]


class Feed(Protocol):
    """A stream opened through a link (a session's notifications, a subscriptions/listen): its
    messages as they come. ``streaming`` False: the hub answered with a whole reply instead (an
    error), which ``messages`` gives (ValueError: no hub answered there)."""

    streaming: bool

    def messages(self) -> Iterator[Any]:
        """The stream's messages, decoded, until it ends or is cancelled."""
        ...

    def cancel(self) -> None:
        """From any thread: end the stream now; a reader blocked in ``messages`` returns."""
        ...

    def close(self) -> None:
        """Release it (after reading, or after a cancel); more than once is fine."""
        ...


class Link(Protocol):
    """What the bridge asks of its upstream, message by message, whatever carries it:
    ``bridge.http_link.Upstream`` turns each message into an HTTP exchange with a hub (HTTP only
    where there is HTTP), ``bridge.stdio_carrier.StdioCarrier`` hands it to the front's server in
    this process. ``session_id`` and ``version``: the handshake-era session the bridge opened
    (None for initialize and for stateless messages, whose ``_meta`` names their revision)."""

    record: HubRecord  # the hub (or front) it reaches

    def call(self, message: Any, session_id: str | None = None, version: str | None = None, size: int = 0) -> Replied:
        """One message (``size``: the bytes it took on stdin, for the carrier's bound; 0 unknown)."""
        ...

    def stream(self, session_id: str, version: str | None) -> Feed:
        """The session's stream of notifications."""
        ...

    def listen(self, message: dict[str, Any]) -> Feed:
        """A stateless subscriptions/listen: its stream (acknowledgement, notifications, final result)."""
        ...

    def end_session(self, session_id: str, version: str | None) -> None:
        """End the session (the bridge is closing)."""
        ...

    def address(self) -> HubAddress | None:
        """Where ``--channel`` watches (None: not reachable so)."""
        ...


@dataclass(frozen=True)
class HubAddress:
    """Where a kernel's hub listens, and its token; or the route that reaches it."""

    url: str
    token: str | None
    scheme: str = HUB_SCHEME  # rules.SERVER_SCHEME for a Jupyter server's endpoint
    route: HubRoute | None = field(default=None, compare=False)

    @cached_property
    def endpoint(self) -> Endpoint:
        return Endpoint.of(self.url)

    @property
    def host(self) -> str:
        return self.endpoint.host

    @property
    def port(self) -> int:
        return self.endpoint.port

    @property
    def path(self) -> str:
        return self.endpoint.path

    def headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        """A stateless request's headers to this hub, its token included."""
        return {
            "Host": f"{self.host}:{self.port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **request_headers(method, params, VERSION),
            **authorization(self.token, self.scheme),
        }
