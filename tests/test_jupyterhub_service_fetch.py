"""Metadata-document fetches within one deadline, in process against real TLS servers on
127.0.0.1: a server that answers its headers one byte at a time and one that sends a body forever
are both cut at the deadline (TLS and headers count, not only the body); callers of one URL share
one fetch; a failure is remembered; the caller's text is generic (the reason is for the log)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("jupyterhub")
from service_oauth import MetadataHost

from mcp_notebook.jupyterhub_service.cimd import MetadataError, MetadataFetcher

pytestmark = pytest.mark.timeout(120)


class Trickle:
    """A TLS server whose every connection gets ``prefix`` then one byte of ``drip`` every 0.2 s."""

    def __init__(self, cert_dir: Path, prefix: bytes, drip: bytes):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert_dir / "cimd-ca.pem", cert_dir / "cimd-key.pem")
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.3)
        self.port = self.sock.getsockname()[1]
        self.prefix, self.drip = prefix, drip
        self.connections = 0
        self.running = True
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while self.running:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._one, args=(raw,), daemon=True).start()

    def _one(self, raw: socket.socket) -> None:
        try:
            conn = self.ctx.wrap_socket(raw, server_side=True)
            conn.recv(4096)
            conn.sendall(self.prefix)
            for _ in range(300):  # bounded: a minute
                if not self.running:
                    break
                conn.sendall(self.drip[:1])
                time.sleep(0.2)
        except OSError:
            pass
        finally:
            raw.close()

    def stop(self) -> None:
        self.running = False
        self.sock.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("certs")
    host = MetadataHost(base)  # makes the self-signed certificate and key for localhost
    host.stop()
    yield base


@pytest.mark.parametrize(
    "prefix, drip",
    [(b"HTTP/1.1 200 OK\r\n", b"X"), (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n", b" ")],
    ids=["headers trickle", "body trickles"],
)
def test_a_trickling_server_is_cut_at_the_deadline(certs, prefix, drip):
    server = Trickle(certs, prefix, drip)
    fetcher = MetadataFetcher(["localhost"], str(certs / "cimd-ca.pem"), max_bytes=5120, timeout=1.5)
    url = f"https://localhost:{server.port}/client.json"
    try:
        start = time.monotonic()
        with pytest.raises(MetadataError) as caught:
            asyncio.run(fetcher.fetch(url))
        took = time.monotonic() - start
        assert "deadline" in str(caught.value) or "too long" in str(caught.value) or "no answer" in str(caught.value)
        assert server.connections == 1
        with pytest.raises(MetadataError, match="failed"):  # remembered: no second connection
            asyncio.run(fetcher.fetch(url))
        assert server.connections == 1
        print(f"\ncut after {took:.2f} s (deadline 1.5 s)")
    finally:
        server.stop()


def test_callers_of_one_url_share_one_fetch(certs):
    server = Trickle(certs, b"", b"")  # accepts TLS, then says nothing
    fetcher = MetadataFetcher(["localhost"], str(certs / "cimd-ca.pem"), timeout=1.0)
    url = f"https://localhost:{server.port}/shared.json"

    async def many() -> list[BaseException | dict]:
        return await asyncio.gather(*(fetcher.fetch(url) for _ in range(20)), return_exceptions=True)

    try:
        results = asyncio.run(many())
        assert all(isinstance(r, MetadataError) for r in results)
        assert server.connections == 1
    finally:
        server.stop()
