"""A TCP relay on 127.0.0.1 that holds each new connection for a while before forwarding its bytes
both ways unchanged: a hub on a slow network, for the races between a reply and a stream opening."""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class SlowRelay:
    """Forwards to ``target`` (host, port); every new connection waits ``delay`` seconds first."""

    def __init__(self, target: tuple[str, int], delay: float):
        self.target = target
        self.delay = delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        time.sleep(self.delay)
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        self._socks += [client, upstream]
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()
        self._pump(client, upstream)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self.listener.close()
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()
        self._thread.join(5)
