"""The Jupyter server extension: MCP to the kernels of a (remote) Jupyter server, through its own auth.

Routes (all authenticated with the server's identity provider):

- ``{base_url}mcp-notebook/kernels``: JSON list of this server's kernels (with a hub, or served from
  the server's side: ``carrier`` says which).
- ``{base_url}mcp-notebook/kernels/{kernel_id}/mcp``: the kernel's MCP endpoint (POST/GET/DELETE),
  piped to its hub on loopback with the hub's own token, or over the kernel's control channel
  when the hub is on another host (a kernel gateway, a non-local provisioner); a kernel without a
  hub is answered by the server's side (served.py, mcp_notebook.serverside).
- ``{base_url}mcp-notebook/kernels/{kernel_id}/document``: the live document JupyterLab pushes for
  a kernel without a hub.
- ``{base_url}mcp-notebook/mcp`` and ``…/focus``: every kernel behind one endpoint (front.py).

A jupyter_server ``ExtensionApp`` (extension.py: ``MCPNotebookExtension``, its settings and its
state), enabled by ``jupyter-config/server-config/mcp_notebook.json`` (installed into
``etc/jupyter/jupyter_server_config.d``) or ``--ServerApp.jpserver_extensions=mcp_notebook=True``.
Its stop (the server's shutdown, before the kernels are shut down) closes what it opened: the front
and its upstream listens, the connections to hubs, the kernels' control channels and their wires, the
IOPub watch.
Settings: ``c.MCPNotebookExtension.max_body_bytes``, ``c.MCPNotebookExtension.route``
(``c.MCPNotebookProxy.*`` and its ``carrier``: deprecated aliases, read for one more release); for kernels
without a hub (served from the server's side, mcp_notebook.serverside): ``serve_without_hub``,
``variable_snippets`` (off by default), ``snippet_seconds``.
"""

from __future__ import annotations

KERNEL_ID = r"(?P<kernel_id>\w+-\w+-\w+-\w+-\w+)"  # the server's own kernel id pattern
