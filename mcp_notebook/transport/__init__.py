"""Transports: Streamable HTTP (HTTP/1.1 on asyncio, in a daemon thread)."""
