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

A jupyter_server ``ExtensionApp`` (extension.py: ``MCPNotebookExtension``), enabled by
``jupyter-config/server-config/mcp_notebook.json`` (installed into ``etc/jupyter/jupyter_server_config.d``)
or ``--ServerApp.jpserver_extensions=mcp_notebook=True``. Its stop (the server's shutdown, before
the kernels are shut down) closes what it opened: the front and its upstream listens, the
connections to hubs, the kernels' control channels and their wires, the IOPub watch.
Settings: ``c.MCPNotebookProxy.max_body_bytes``, ``c.MCPNotebookProxy.carrier``; for kernels without
a hub (served from the server's side, mcp_notebook.serverside): ``serve_without_hub``,
``variable_snippets`` (off by default), ``snippet_seconds``.
"""

from __future__ import annotations

from traitlets import Bool, Enum, Float, Int
from traitlets.config import LoggingConfigurable

KERNEL_ID = r"(?P<kernel_id>\w+-\w+-\w+-\w+-\w+)"  # the server's own kernel id pattern


class MCPNotebookProxy(LoggingConfigurable):
    """Settings of the mcp-notebook server extension."""

    max_body_bytes = Int(1_000_000, help="Largest MCP request body the server passes to a hub (HTTP 413 above).").tag(
        config=True
    )
    carrier = Enum(
        ["auto", "tcp", "control"],
        "auto",
        help="How the server reaches a kernel's hub: auto (loopback TCP when the hub's runtime file is on this "
        "host, else the kernel's control channel: a kernel gateway, a non-local provisioner), tcp only, or "
        "control only (e.g. kernels in containers that share the server's provisioner).",
    ).tag(config=True)
    serve_without_hub = Bool(
        True,
        help="Serve kernels that have no mcp-notebook hub (R, xeus-python, Julia, a Python kernel without "
        "%load_ext) from the server's side: their cells and outputs as the server sees them on IOPub, their "
        "notebook, and R variables through inspect_request. Nothing is loaded into the kernel.",
    ).tag(config=True)
    variable_snippets = Bool(
        False,
        help="Opt in to the read-only snippets that list an R kernel's variables (nb://vars) and page its data "
        "frames (nb://frames/{name}): run silently while the kernel is idle, bounded by setTimeLimit inside R, "
        "assigning nothing, moving no execution count, printing nothing (docs/kernels.md shows them).",
    ).tag(config=True)
    snippet_seconds = Float(
        2.0, help="The longest a variable snippet may run inside the kernel (R's setTimeLimit), in seconds."
    ).tag(config=True)
