"""Sans-IO MCP: JSON-RPC framing, revisions, resource models, sessions and dispatch."""
