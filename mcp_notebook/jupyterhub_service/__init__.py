"""The JupyterHub service: one MCP endpoint for every user of a hub, with MCP authorization.

``python -m mcp_notebook.jupyterhub_service`` (started by JupyterHub, one entry of ``c.JupyterHub.services``)
serves ``{hub}/services/mcp-notebook/mcp``. A client that knows only that URL discovers the
authorization server (this service), registers (Client ID Metadata Document, Dynamic Client
Registration, or a client from the config), sends its user through JupyterHub's own sign-in and a
consent page, and gets tokens bound to the endpoint. Each request then reaches only the signed-in
user's running servers, through their ``mcp-notebook`` server extension, with that user's own
JupyterHub token. docs/DESIGN.md, "One URL for every user of a JupyterHub".

Needs the ``hub`` extra (jupyterhub, authlib); nothing here is imported by a kernel.
"""
