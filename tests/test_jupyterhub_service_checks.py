"""JupyterHub's answer about a grant's user is asked again just before it goes stale, off the reads'
path (``Fronts.renew_checks`` calls ``JupyterHubLink.model(ahead)``): a read then finds it fresh.
A real HTTP server on 127.0.0.1 stands for JupyterHub's ``/user``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("jupyterhub")

from mcp_notebook.jupyterhub_service.users import JupyterHubLink, JupyterHubRefused


@pytest.fixture
def jupyterhub() -> Iterator[tuple[str, list[str]]]:
    asked: list[str] = []

    class User(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.headers.get("Authorization", ""))
            refused = self.headers.get("Authorization") == "token revoked"
            body = json.dumps({"name": "alice", "servers": {}, "scopes": []}).encode()
            self.send_response(403 if refused else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), User)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hub/api", asked
    finally:
        server.shutdown()


def test_the_answer_is_renewed_ahead_of_going_stale_and_a_refusal_still_counts(jupyterhub):
    url, asked = jupyterhub
    link = JupyterHubLink(url, "alice", "token good", check_seconds=1.5)
    link.model()
    assert len(asked) == 1 and link.fresh()
    link.model(ahead=1.0)  # 0.5 s left of 1.5: not yet
    assert len(asked) == 1
    time.sleep(0.7)
    assert link.fresh()  # a read would not ask
    link.model(ahead=1.0)  # within a second of going stale: asked again now, off the reads' path
    assert len(asked) == 2 and link.fresh()
    link.jupyterhub_token = "revoked"
    time.sleep(0.6)
    with pytest.raises(JupyterHubRefused):
        link.model(ahead=1.0)
    assert link.refused is not None and not link.fresh()
