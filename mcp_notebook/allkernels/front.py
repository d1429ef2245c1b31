"""The front that serves every kernel: an McpServer over a KernelsProvider, optionally on its own
loopback HTTP endpoint (tests and benchmarks; the bridge drives it in-process: bridge/stdio_carrier.py)."""

from __future__ import annotations

import secrets

from ..instructions import FRONT
from ..protocol.exchange import ServerSettings
from ..protocol.server import McpServer
from ..providers.nb_tools import add_nb_tools
from ..providers.views import ViewsProvider
from ..resources import Resources
from ..transport.server import HttpTransport
from ..version import __version__
from .directory import Directory
from .provider import KernelsProvider

MAX_BODY_BYTES = 4 * 1024 * 1024


class KernelsFront:
    """One MCP server for all kernels a directory finds (both protocol eras)."""

    def __init__(
        self,
        directory: Directory,
        token: str | None = None,
        provider: KernelsProvider | None = None,
        instructions: str = FRONT,
    ):
        self.provider = provider or KernelsProvider(directory)
        self.resources = Resources([self.provider, ViewsProvider()])  # views: for Apps hosts (listed to them only)
        self.provider.changed = lambda uris, list_changed: self.resources.changed(uris, list_changed)
        self.settings = ServerSettings(
            name="mcp-notebook",
            version=__version__,
            title="Jupyter kernels (mcp-notebook)",
            description="Live variables, data and cells of every running Jupyter kernel as MCP resources.",
            instructions=instructions,
            token=token or secrets.token_urlsafe(32),
        )
        self.server = McpServer(self.resources, self.settings)
        add_nb_tools(self.server.tools)  # the nb:// words and the Apps views' tools (qualified URIs pass)
        self.transport: HttpTransport | None = None

    def serve_http(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on loopback HTTP (a thread of its own); returns the endpoint URL."""
        self.transport = HttpTransport(self.server, host, port, MAX_BODY_BYTES)
        self.transport.start()
        return self.transport.url

    def close(self) -> None:
        """The upstream listens first: closing the server ends its clients' streams, which would
        change what is watched and open new listens."""
        self.provider.close()
        if self.transport is not None:
            self.transport.stop()
        else:
            self.server.close()
        self.resources.close()
