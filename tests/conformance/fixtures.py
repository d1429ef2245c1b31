"""Conformance-suite fixtures, registered inside the kernel through the public API.

tests/test_conformance.py runs this file's source in a kernel that has mcp_notebook loaded. The URIs
are the ones the official suite reads (resources-read-text, -read-binary, -templates-read, -subscribe).
"""

import struct
import zlib

import mcp_notebook


def _tiny_png() -> bytes:
    """A valid 1x1 opaque red PNG (signature, IHDR, IDAT, IEND with real CRCs)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit, truecolour
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte + one RGB pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


_PNG = _tiny_png()


@mcp_notebook.resource("test://static-text", name="static-text", mime_type="text/plain")
def _conformance_static_text() -> str:
    """A fixed text resource."""
    return "This is the content of the static text resource."


@mcp_notebook.resource("test://static-binary", name="static-binary", mime_type="image/png")
def _conformance_static_binary() -> bytes:
    """A fixed binary resource: a 1x1 PNG."""
    return _PNG


@mcp_notebook.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def _conformance_template(id: str) -> dict:
    """A templated resource whose text contains the id."""
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


@mcp_notebook.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def _conformance_watched() -> str:
    """A resource clients subscribe to."""
    return "watched"
