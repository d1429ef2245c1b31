"""Carriers of MCP messages. Streamable HTTP: http11_state (a connection's HTTP/1.1 state, without
I/O, over the codec protocol/wire_http11), connection (one client connection on the loop), server
(socket, thread, loop), loop, latency (remembered heads, busy polling, the switch interval)."""
