"""The connection's HTTP/1.1 state machine (transport/http11_state.py), sans-IO: every legal
transition, the impossible ones refused, pipelining, a refused body dropped then closed, the
client's half-close, keep-alive per HTTP version; and random event sequences keep its invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_notebook.protocol.wire_http11 import BadRequest, parse_head
from mcp_notebook.transport.http11_state import (
    ANSWERING,
    CLOSED,
    DISCARD,
    DONE,
    GONE,
    IDLE,
    MUST_CLOSE,
    SEND_BODY,
    SEND_LONG,
    SEND_RESPONSE,
    ConnectionState,
    StateError,
)


def _req(body: bytes = b"{}", *, version: str = "HTTP/1.1", extra: str = "") -> bytes:
    return f"POST /mcp {version}\r\n{extra}Content-Length: {len(body)}\r\n\r\n".encode() + body


def _sides(state: ConnectionState) -> tuple[int, int]:
    return state.client, state.ours


def _read_head(state: ConnectionState):
    block = state.next_head()
    assert block is not None
    return parse_head(block)


def _answering(data: bytes) -> ConnectionState:
    """A state with the request in ``data`` read whole (admitted) and being answered."""
    state = ConnectionState(1000)
    state.reader.buf += data
    state.head_admitted(_read_head(state))
    assert state.next_body() is not None
    return state


def test_a_request_read_in_pieces_answered_then_the_next():
    state = ConnectionState(1000)
    assert _sides(state) == (IDLE, IDLE) and state.idle and state.may_read and state.between_requests
    state.reader.buf += _req(b'{"a": 1}')[:20]
    assert state.next_head() is None and _sides(state) == (IDLE, IDLE) and not state.between_requests
    state.reader.buf += _req(b'{"a": 1}')[20:-3]
    state.head_admitted(_read_head(state))
    assert _sides(state) == (SEND_BODY, IDLE) and state.may_read and not state.idle
    assert state.next_body() is None and _sides(state) == (SEND_BODY, IDLE)
    state.reader.buf += b": 1}"[-3:]
    assert state.next_body() == b'{"a": 1}'
    assert _sides(state) == (DONE, SEND_RESPONSE) and state.busy and not state.may_read and state.keep
    assert state.reply_done(True) is True
    assert _sides(state) == (IDLE, IDLE) and state.idle and not state.busy


def test_pipelined_requests_are_read_one_at_a_time():
    state = ConnectionState(1000)
    state.reader.buf += _req(b"one") + _req(b"two")
    state.head_admitted(_read_head(state))
    assert state.next_body() == b"one"
    with pytest.raises(StateError):  # the second waits until the first is answered
        state.next_head()
    assert state.reply_done(True)
    assert not state.between_requests  # the second is buffered
    state.head_admitted(_read_head(state))
    assert state.next_body() == b"two" and not state.reader.buf
    assert state.reply_done(True) and state.between_requests


def test_a_whole_request_read_in_one_go():
    state = ConnectionState(1000)
    state.whole_request(True)
    assert _sides(state) == (DONE, SEND_RESPONSE)
    with pytest.raises(StateError):
        state.whole_request(True)  # one request at a time
    assert state.reply_done(True) and state.idle


def test_a_stream_that_ends_with_its_answer_keeps_the_connection():
    state = _answering(_req())
    state.stream_opened(False, True)
    assert _sides(state) == (DONE, SEND_BODY) and state.keep and state.busy
    assert not state.peer_eof()  # the client half-closed: it still reads the answer
    assert not state.client_gone
    assert state.reply_done(True) is True and _sides(state) == (IDLE, IDLE) and state.eof


def test_a_long_lived_stream_whose_client_half_closes_is_gone():
    state = _answering(_req())
    state.stream_opened(True, True)
    assert _sides(state) == (DONE, SEND_LONG) and not state.client_gone
    assert state.peer_eof() is True  # close now
    assert state.client_gone and state.client == GONE
    state.close()
    assert state.closed and not state.may_read
    assert state.reply_done(True) is False  # the stream's end after the close


def test_a_client_that_half_closed_before_its_long_stream_opens_is_gone_at_once():
    state = _answering(_req())
    assert state.peer_eof() is False  # being answered: the answer goes first
    state.stream_opened(True, True)
    assert state.client_gone
    assert state.reply_done(True) is False and state.ours == MUST_CLOSE and state.client == GONE


def test_half_close_between_requests_closes_and_mid_request_too():
    idle = ConnectionState(1000)
    assert idle.peer_eof() is True
    partial = ConnectionState(1000)
    partial.reader.buf += _req(b"abcdef")[:-2]
    partial.head_admitted(_read_head(partial))
    assert partial.next_body() is None and partial.peer_eof() is True


def test_http10_does_not_keep_the_connection_unless_asked():
    state = _answering(_req(version="HTTP/1.0"))
    assert not state.keep
    with pytest.raises(StateError):
        state.reply_done(True)
    assert state.reply_done(False) is False and _sides(state) == (MUST_CLOSE, MUST_CLOSE)
    asked = _answering(_req(version="HTTP/1.0", extra="Connection: keep-alive\r\n"))
    assert asked.keep
    asked.stream_opened(False, False)  # an HTTP/1.0 stream ends with the close
    assert not asked.keep
    assert asked.reply_done(False) is False


def test_connection_close_is_not_kept():
    state = _answering(_req(extra="Connection: close\r\n"))
    assert not state.keep
    with pytest.raises(StateError):
        state.reply_done(True)


def test_a_refused_body_all_here_is_skipped_and_the_connection_goes_on():
    state = ConnectionState(1000)
    state.reader.buf += _req(b"body") + b"GET"
    state.head_refused(_read_head(state))
    assert _sides(state) == (DONE, SEND_RESPONSE) and state.keep and bytes(state.reader.buf) == b"GET"
    assert state.reply_done(True) and state.idle


def test_a_refused_body_still_coming_is_discarded_then_closed():
    state = ConnectionState(1000)
    state.reader.buf += _req(b"0123456789")[:-6]
    state.head_refused(_read_head(state))
    assert _sides(state) == (DISCARD, SEND_RESPONSE) and not state.keep and not state.reader.buf
    with pytest.raises(StateError):
        state.reply_done(True)  # the rest of the body would be read as a request
    assert state.reply_done(False) is False and _sides(state) == (DISCARD, MUST_CLOSE)
    assert not state.may_read
    assert state.dropped(4) is False and state.discard_left == 2
    assert state.dropped(5) is True and _sides(state) == (MUST_CLOSE, MUST_CLOSE)
    with pytest.raises(StateError):
        state.dropped(1)
    state.close()
    assert state.closed


def test_a_refused_chunked_body_is_dropped_until_the_linger_deadline():
    state = ConnectionState(1000)
    state.reader.buf += b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"
    state.head_refused(_read_head(state))
    assert state.client == DISCARD and state.discard_left == -1
    state.reply_done(False)
    assert state.dropped(10_000) is False and state.client == DISCARD  # unknown length: never "all in"
    assert state.peer_eof() is True  # the client stops sending: close


def _trickled_head() -> ConnectionState:
    state = ConnectionState(1000)
    state.reader.buf += b"POST /mcp HTT"
    assert state.next_head() is None
    return state


def _trickled_body() -> ConnectionState:
    state = ConnectionState(1000)
    state.reader.buf += _req(b"abcdef")[:-2]
    state.head_admitted(_read_head(state))
    assert state.next_body() is None
    return state


@pytest.mark.parametrize("make", [_trickled_head, _trickled_body])
def test_a_bad_or_late_request_is_answered_then_closed(make):
    state = make()
    state.failed()
    assert _sides(state) == (MUST_CLOSE, SEND_RESPONSE) and not state.keep and not state.reader.buf
    assert state.reader.head is None
    with pytest.raises(StateError):
        state.reply_done(True)
    assert state.reply_done(False) is False and _sides(state) == (MUST_CLOSE, MUST_CLOSE)


def test_a_body_too_large_is_a_bad_request_and_no_transition():
    state = ConnectionState(10)
    state.reader.buf += _req(b"x" * 11)
    head = _read_head(state)
    with pytest.raises(BadRequest):
        state.head_admitted(head)
    assert _sides(state) == (IDLE, IDLE)
    state.failed()  # what the connection does next
    assert state.ours == SEND_RESPONSE


@pytest.mark.parametrize(
    "setup, move",
    [
        (lambda s: None, lambda s: s.reply_done(False)),  # nothing asked
        (lambda s: None, lambda s: s.stream_opened(False, True)),
        (lambda s: None, lambda s: s.next_body()),
        (lambda s: None, lambda s: s.dropped(1)),
        (lambda s: s.whole_request(True), lambda s: s.next_head()),
        (lambda s: s.whole_request(True), lambda s: s.failed()),
        (lambda s: s.whole_request(True), lambda s: s.head_refused(parse_head(b"GET / HTTP/1.1"))),
        (lambda s: s.whole_request(True), lambda s: s.head_admitted(parse_head(b"GET / HTTP/1.1"))),
        (lambda s: (s.whole_request(True), s.stream_opened(True, True)), lambda s: s.stream_opened(True, True)),
        (lambda s: (s.whole_request(True), s.reply_done(True)), lambda s: s.reply_done(True)),
        (lambda s: s.close(), lambda s: s.next_head()),
        (lambda s: s.lost(), lambda s: s.whole_request(True)),
    ],
)
def test_impossible_transitions_raise_and_change_nothing(setup, move):
    state = ConnectionState(1000)
    setup(state)
    before = (state.client, state.ours, state.keep, state.eof, state.idle)
    with pytest.raises(StateError):
        move(state)
    assert (state.client, state.ours, state.keep, state.eof, state.idle) == before


def test_close_and_loss_from_anywhere():
    state = _answering(_req())
    state.close()
    assert state.closed and state.client == DONE and not state.client_gone and not state.idle
    assert state.reply_done(True) is False  # the answer after the close: nothing more
    state.lost()
    assert _sides(state) == (CLOSED, CLOSED) and state.client_gone
    fresh = ConnectionState(1000)
    fresh.lost()
    assert fresh.client_gone and not fresh.may_read and not fresh.idle


# -- random event sequences ----------------------------------------------------------------------
_EVENTS = st.sampled_from(
    [
        "bytes",
        "head",
        "admit",
        "refuse",
        "body",
        "whole",
        "fail",
        "stream",
        "long",
        "keep",
        "end",
        "drop",
        "eof",
        "close",
        "lost",
    ]
)


def _step(state: ConnectionState, event: str, data: bytes) -> None:
    if event == "bytes":
        state.reader.buf += data
    elif event == "head":
        state.next_head()
    elif event in ("admit", "refuse"):
        head = parse_head(b"POST /mcp HTTP/1.1\r\nContent-Length: 3")
        (state.head_admitted if event == "admit" else state.head_refused)(head)
    elif event == "body":
        state.next_body()
    elif event == "whole":
        state.whole_request(True)
    elif event == "fail":
        state.failed()
    elif event in ("stream", "long"):
        state.stream_opened(event == "long", True)
    elif event in ("keep", "end"):
        state.reply_done(event == "keep")
    elif event == "drop":
        state.dropped(2)
    else:
        getattr(state, {"eof": "peer_eof", "close": "close", "lost": "lost"}[event])()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_EVENTS, st.binary(max_size=8)), max_size=40))
def test_random_event_sequences_keep_the_invariants(events):
    """Whatever the order of events: a refused one changes nothing, and the sides never mix
    (a request answered while another is read, a read after the close, a lost side that comes back)."""
    state = ConnectionState(1000)
    for event, data in events:
        before = (state.client, state.ours, state.keep, state.idle)
        try:
            _step(state, event, data)
        except StateError:
            assert (state.client, state.ours, state.keep, state.idle) == before
        except BadRequest:
            pass  # bytes that are no request: the connection answers failed() next
        assert state.idle == (state.client == IDLE and state.ours == IDLE)
        if state.ours in ANSWERING:  # answering: the request was all read (or is being dropped)
            assert state.client in (DONE, DISCARD, MUST_CLOSE, GONE, CLOSED)
        if state.client == SEND_BODY:
            assert state.ours in (IDLE, CLOSED) and state.reader.head is not None
        if state.may_read:
            assert state.ours == IDLE and not state.closed
        if before[0] == CLOSED and before[1] == CLOSED:
            assert _sides(state) == (CLOSED, CLOSED)  # lost is for good
        if before[1] == CLOSED:
            assert state.ours == CLOSED  # so is our close
