"""Deprecated name of :mod:`mcp_notebook.jupyterhub_service` (renamed after 0.1.0: "hub" is the kernel's
MCP server only). ``python -m mcp_notebook.hubservice`` still runs the service, with a warning
naming the new spelling; this alias goes away in the next release."""
