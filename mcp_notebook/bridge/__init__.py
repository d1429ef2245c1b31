"""The stdio bridge: stdio.py (MCP over stdin/stdout to a hub or to every kernel), remote.py (a
Jupyter server's hubs), hub_selection.py (which hub), claude_push.py (the Claude Code push)."""
