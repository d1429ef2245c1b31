"""All knobs, as traitlets on one Configurable: ``c.MCPHub.port = 8765`` in ipython_config.py,
or ``%config MCPHub.port = 8765`` before ``%load_ext mcp_notebook``."""

from __future__ import annotations

from traitlets import Bool, Enum, Float, Int, List, Unicode, validate
from traitlets.config import Configurable

from ..instructions import HUB as INSTRUCTIONS
from ..redact import DEFAULT_SECRET_WORDS

MAX_BODY_BYTES = 1_000_000  # a request body a hub accepts by default (the server extension passes no more)


class MCPHub(Configurable):
    """Settings of the in-kernel MCP hub."""

    host = Unicode("127.0.0.1", help="Address to bind. Anything but loopback is an explicit, warned opt-in.").tag(
        config=True
    )
    port = Int(0, help="TCP port; 0 picks a free one.").tag(config=True)
    require_token = Bool(True, help="Require 'Authorization: Bearer <token>' on every request.").tag(config=True)
    token = Unicode("", help="Fixed token (default: a fresh random one per hub).").tag(config=True)
    allowed_origins = List(Unicode(), help="Extra Origin values to accept besides loopback ones.").tag(config=True)
    allowed_hosts = List(
        Unicode(),
        help="Host names or addresses clients may use besides loopback ones (Host header, and the host of an "
        "Origin), for a hub bound to another address on purpose. Empty (default): loopback only.",
    ).tag(config=True)
    event_loop = Enum(
        ["auto", "uvloop", "asyncio"],
        "auto",
        help="The server thread's event loop: uvloop when installed (auto, the default), or asyncio's own. "
        "The MCP_NOTEBOOK_LOOP environment variable overrides it; MCP_NOTEBOOK_PORTABLE=1 (every Linux-only fast "
        "path off) always uses asyncio's.",
    ).tag(config=True)
    busy_poll_us = Int(
        50,
        help="Microseconds the server thread keeps polling after a reply before it sleeps, so a client's next "
        "request finds it awake (off while a cell runs, and with MCP_NOTEBOOK_PORTABLE=1; 0 turns it off).",
    ).tag(config=True)
    namespace_table_reads = Bool(
        True,
        help="Find what each cell changed by copying the namespace dict's own entry table (CPython on Linux, "
        "with process_vm_readv on this process: it cannot fault) instead of listing every name and value: "
        "~10x less per cell with 100,000 names. Verified on probe dicts and against every new table before "
        "it is trusted; False: always list (the portable way, also taken with MCP_NOTEBOOK_PORTABLE=1). Read when the "
        "hub loads.",
    ).tag(config=True)
    held_sockets = Bool(
        True,
        help="Read and write client sockets with libc calls that keep the GIL (Linux), so a read while a cell runs "
        "waits for the GIL once instead of twice; False: the event loop's own transports (as with "
        "MCP_NOTEBOOK_PORTABLE=1, and where libc cannot be called). Read when the hub loads.",
    ).tag(config=True)
    switch_interval_us = Int(
        250,
        help="While a cell runs and an MCP client is connected, the interpreter's GIL switch interval (sys."
        "setswitchinterval) in microseconds, so a read is answered within about this long instead of CPython's "
        "default 5 ms; put back exactly when the cell ends, the last client leaves or the hub unloads, and never "
        "raised above your own setting. 0 leaves the interpreter's setting alone.",
    ).tag(config=True)
    control_channel = Bool(
        True,
        help="Also answer MCP on the kernel's control channel (for a Jupyter server that cannot reach this "
        "kernel's loopback port: a kernel gateway, a container). Only a peer holding the kernel's key, which "
        "may already run code here, can use it; the hub's token is still required on every request.",
    ).tag(config=True)
    max_body_bytes = Int(MAX_BODY_BYTES, help="Largest request body accepted (HTTP 413 above).").tag(config=True)
    max_batch = Int(50, help="Most messages in one JSON-RPC batch (2025-03-26).").tag(config=True)
    max_sessions = Int(64, help="Most concurrent handshake-era sessions; the least recently used goes.").tag(
        config=True
    )
    max_read_chars = Int(40_000, help="Cap on the text of one resource read (~10k tokens).").tag(config=True)
    max_result_chars = Int(
        50_000,
        help="Cap on one result as sent (serialized JSON: escaping counted); reads and tools page to fit it.",
    ).tag(config=True)
    repr_timeout = Float(2.0, help="Seconds a user __repr__ may take during a read.").tag(config=True)
    page_size = Int(500, help="Items per page of resources/list and resources/templates/list.").tag(config=True)
    secret_words = List(
        Unicode(), default_value=list(DEFAULT_SECRET_WORDS), help="Name words that hide a variable as a secret."
    ).tag(config=True)
    include_names = List(Unicode(), help="Regexes of names always exposed (beats secret_words).").tag(config=True)
    exclude_names = List(Unicode(), help="Regexes of names never exposed.").tag(config=True)
    instructions = Unicode(
        INSTRUCTIONS, help="Instructions sent to clients (what the model is told: docs/model-context.md)."
    ).tag(config=True)
    # -- tables and arrays (providers/frames/)
    frame_page_rows = Int(100, help="Rows of a nb://frames page when the URI gives no limit.").tag(config=True)
    frame_max_rows = Int(10_000, help="Largest limit a nb://frames page accepts.").tag(config=True)
    frame_max_columns = Int(100, help="Columns of a nb://frames page when the URI gives no columns=.").tag(config=True)
    frame_stats_rows = Int(1_000_000, help="Leading rows scanned for the statistics of nb://frames/{name}/schema.").tag(
        config=True
    )

    engine_timeout = Float(
        30.0,
        help="Seconds one engine call (a page, a count, statistics of a Spark/Dask/DuckDB/Ibis/polars lazy frame) "
        "may take before it is cancelled and the read fails with an error.",
    ).tag(config=True)
    engine_stats_rows = Int(
        100_000, help="Leading rows a lazy engine frame returns for ?stats=true of nb://frames/{name}/schema."
    ).tag(config=True)

    @validate("engine_timeout")
    def _positive_timeout(self, proposal):
        if not proposal["value"] > 0:
            raise ValueError("engine_timeout must be positive")
        return proposal["value"]

    @validate("frame_page_rows", "frame_max_rows", "frame_max_columns", "frame_stats_rows", "engine_stats_rows")
    def _positive_frames(self, proposal):
        if proposal["value"] < 1:
            raise ValueError(f"{proposal['trait'].name} must be at least 1")
        return proposal["value"]

    # -- executed cells and the notebook document (providers/cells.py, providers/notebook.py)
    max_cells = Int(200, help="Executed cells kept in the history (nb://cells); older ones are dropped.").tag(
        config=True
    )
    max_output_chars = Int(500_000, help="Characters kept per captured output; the rest is cut with a note.").tag(
        config=True
    )
    max_image_bytes = Int(5_000_000, help="Images larger than this are dropped from captured outputs.").tag(config=True)
    max_cell_outputs = Int(500, help="Outputs kept per executed cell; further ones are counted, not kept.").tag(
        config=True
    )
    figure_descriptions = Bool(
        True,
        help="Describe each figure and rich output in text a model can read (matplotlib figures from the live "
        "object when shown, Plotly and Vega-Lite from their JSON, HTML tables as Markdown), served after the "
        "exact image and at nb://cells/{seq}/outputs/{index}/description. Kept on the hub's side only. "
        "Read each time: off, nothing is described or served from then on.",
    ).tag(config=True)
    figure_description_chars = Int(2000, help="Longest figure description, in characters (at least 200).").tag(
        config=True
    )
    notebook_path = Unicode(
        "", help="Path of the .ipynb for nb://notebook (default: from the frontend: JPY_SESSION_NAME, VS Code)."
    ).tag(config=True)

    @validate("figure_description_chars")
    def _description_chars(self, proposal):
        if proposal["value"] < 200:
            raise ValueError("figure_description_chars must be at least 200")
        return proposal["value"]

    @validate("max_cells", "max_output_chars", "max_image_bytes", "max_cell_outputs")
    def _positive_capture(self, proposal):
        if proposal["value"] < 1:
            raise ValueError(f"{proposal['trait'].name} must be at least 1")
        return proposal["value"]

    @validate("port")
    def _valid_port(self, proposal):
        value = proposal["value"]
        if not 0 <= value <= 65535:
            raise ValueError(f"port must be 0..65535, got {value}")
        return value

    @validate("max_read_chars", "max_result_chars", "page_size", "max_body_bytes", "max_batch", "max_sessions")
    def _positive(self, proposal):
        if proposal["value"] < 1:
            raise ValueError(f"{proposal['trait'].name} must be at least 1")
        return proposal["value"]
