"""HTTPS in front of a hub on 127.0.0.1: a TLS server (a certificate made by ``openssl`` for the
test) forwarding each connection's bytes both ways unchanged, on an asyncio loop of its own (TLS
reads and writes of one connection never run on two threads at once), streams included."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
import threading
from pathlib import Path

OPENSSL = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
OPENSSL += ["-addext", "subjectAltName=IP:127.0.0.1"]


def certificate(tmp: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: (key, certificate) files."""
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run([*OPENSSL, "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return key, cert


class AsyncTlsRelay:
    """``https://127.0.0.1:{port}`` forwarding to ``target`` (host, port); :meth:`close` ends it all."""

    def __init__(self, target: tuple[str, int], key: Path, cert: Path):
        self.target = target
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()
        self.server = self.loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0, ssl=self.context))
        self.port = self.server.sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        dst.close()

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            for w in self._writers:
                w.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
