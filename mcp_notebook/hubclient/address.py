"""Where a hub is and what reaches it: :class:`HubAddress` (a URL and token, or a :class:`HubRoute`)
and :class:`Link`, the surface the bridge drives (``bridge.http_link.Upstream`` over HTTP, the stdio
carrier in-process)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

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


class Shutdown(Protocol):
    """What ends a stream at once and wakes its blocked reader (a socket, or the stdio carrier's reading)."""

    def shutdown(self, how: int, /) -> None: ...


class Opened(Protocol):
    """What carries one exchange the bridge opened (``hubclient.blocking.HubConnection``, the stdio
    carrier's ``Reading``): closed when done; ``sock`` shut down to cancel (None once closed)."""

    @property
    def sock(self) -> Shutdown | None: ...

    def close(self) -> None: ...


class OpenReply(Protocol):
    """A reply whose status is known (``hubclient.blocking.HubResponse``, the stdio carrier's
    ``Reading``): its fields, and its body whole or line by line as it comes (a stream)."""

    @property
    def status(self) -> int: ...

    def getheader(self, name: str, default: str | None = None) -> str | None: ...

    def read(self) -> bytes: ...

    def readline(self) -> bytes: ...


class Link(Protocol):
    """What the bridge asks of its upstream, whatever carries it (``bridge.http_link.Upstream``,
    ``bridge.stdio_carrier.StdioCarrier``)."""

    record: HubRecord  # the hub (or front) it reaches

    def open(
        self, method: str, headers: dict[str, str], body: bytes | None = None, timeout: float | None = None
    ) -> tuple[Opened, OpenReply]:
        """One exchange, the reply once its status is known: (its connection, the response)."""
        ...

    def call(self, headers: dict[str, str], message: Any) -> tuple[int, dict[str, str], list[Any]]:
        """POST one message; (status, lower-cased headers, the JSON-RPC messages of the reply)."""
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
