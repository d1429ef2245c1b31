"""What each server tells the model (MCP ``instructions``): the in-kernel hub, the all-kernels front
(bridge, Jupyter server endpoint) and the JupyterHub service.

Hosts put these words before the model with the tool and template descriptions, so they say when to
use what and stay short: tests/test_plugin.py holds each at 300 characters or more and the whole
context a host receives (instructions, tools/list, resources/templates/list) under 12,000
characters per server; docs/model-context.md shows them in full (checked by the same tests).
"""

from __future__ import annotations

# How to read a kernel, the same for every server (URIs bare: the current kernel).
_READING = (
    "Read the kernel instead of asking the user to print a value, and never re-run their cells to see "
    "a result: reads are bounded and run none of their code. What is defined: nb://vars; one value: "
    "nb://vars/{name}. A table: nb://frames/{name}/schema first, then only the rows you need: "
    "nb://frames/{name}?limit=20&columns=a,b&sort=-a&where=a>3; never page through a whole frame. "
    "Cells: nb://cells (status, timing), nb://cells/{seq} (source, outputs, what it changed), "
    "nb://cells/{seq}/outputs/{index} (text, images). Where a value came from: nb://lineage/vars/{name}. "
    "Kernel and language: nb://kernel. Tools: read_resource takes these URIs; changes_since waits for "
    "the next change."
)

HUB = "This server is one live Jupyter kernel: its variables, tables, executed cells and outputs. " + _READING

FRONT = (
    "This server is every running Jupyter kernel with mcp-notebook loaded. nb://kernels lists them; "
    "nb://kernels/{kernel}/vars reads one's variables, and so on for every URI below ({kernel}: its "
    "notebook's name or its id); bare URIs such as nb://vars address the current kernel (the notebook "
    "focused last, else the one that ran a cell last). " + _READING
)

SERVICE = (
    "This server is your running Jupyter kernels on this JupyterHub (every server of yours, each kernel "
    "with mcp-notebook loaded). nb://kernels lists them; nb://kernels/{kernel}/vars reads one's "
    "variables, and so on for every URI below ({kernel}: its notebook's name or its id); bare URIs such "
    "as nb://vars address the current kernel. " + _READING
)
