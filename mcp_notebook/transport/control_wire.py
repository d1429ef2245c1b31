"""The control-channel wire (docs/DESIGN.md, "Kernels anywhere"): message names and timing, one
module for the hub's side (transport/control.py) and the server's (serverext/control_client.py, wires.py).
"""

from __future__ import annotations

REQUEST, REPLY, CANCEL, KEEPALIVE = "mcp_request", "mcp_reply", "mcp_cancel", "mcp_keepalive"
INFO, INFO_REPLY = "mcp_info_request", "mcp_info_reply"
TO_HUB = frozenset({REQUEST, CANCEL, KEEPALIVE, INFO})  # what a hub takes off the control stream
FROM_HUB = frozenset({REPLY, INFO_REPLY})  # what comes back to the sender

# A hub ends the streams of a sender it has not heard from for SENDER_IDLE_SECONDS; a sender with
# open streams says it is alive three times as often, so two keepalives in a row may be lost.
SENDER_IDLE_SECONDS = 60.0
KEEPALIVE_SECONDS = SENDER_IDLE_SECONDS / 3
assert KEEPALIVE_SECONDS * 2 < SENDER_IDLE_SECONDS
