"""One MCP endpoint for every kernel: naming.py (the URI scheme), directory.py (where kernels are
found), upstream.py (requests and listen streams to their hubs), provider.py (all their resources
behind one provider), front.py (the server that carries them)."""
