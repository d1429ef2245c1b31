"""The one client of a hub (issue #33): every request from this package to a kernel's hub, or to a
Jupyter server's extension, goes through here. ``rules.py`` holds its rules (timeouts, keep-alive,
retries, the auth header, ``UpstreamError``); ``blocking.py`` is its face for threads (the bridge,
the front's requests, a server's kernel list), ``aio.py`` its face for a loop (the server
extension's pipe, the front's listens); ``address.py`` says where a hub is (``HubAddress``).
"""
