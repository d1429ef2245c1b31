"""Transports: Streamable HTTP (tornado, in a daemon thread)."""
