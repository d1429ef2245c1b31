"""Carriers of MCP messages. Streamable HTTP: http11 (HTTP/1.1 without I/O), http11_state (a
connection's HTTP/1.1 state, without I/O), connection (one client connection on the loop), server
(socket, thread, loop), loop, heads, busy_poll."""
