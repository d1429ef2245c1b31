"""The HTTP/1.1 state of one connection, without I/O (h11's ``ConnectionState``, our subset).

Each side of the connection is in one explicit state, and only named transitions move them; an
impossible one (a reply done while nothing was asked, a request read while one is being answered)
raises :class:`StateError` instead of leaving a mix of flags. The machine also owns the bytes read
(its :class:`~..protocol.wire_http11.RequestReader`). The connection (connection.py) asks it: may I read the next
request (:attr:`ConnectionState.may_read`), is the client gone (:attr:`ConnectionState.client_gone`),
is it idle (:attr:`ConnectionState.idle`). Deadlines stay with the connection: they are loop time,
and the machine, like h11's, knows no clock.

The client's side: ``IDLE`` (nothing of a next request consumed; bytes of it may be buffered) →
``SEND_BODY`` (an admitted head read, its body being read) → ``DONE`` (the request is whole and
being answered) → ``IDLE`` again when the reply keeps the connection, else ``MUST_CLOSE`` (nothing
more is read). A refused request whose body is still on its way goes to ``DISCARD`` (its bytes are
dropped as they come, then ``MUST_CLOSE``). ``GONE``: it half-closed while a long-lived stream
was written to it (it reads no more of it: h11's CLOSED for their side). ``CLOSED``: the
connection is lost.

Our side: ``IDLE`` (no request to answer) → ``SEND_RESPONSE`` (one is being answered, its reply not
begun) → the whole reply written (``IDLE`` or ``MUST_CLOSE``), or ``SEND_BODY`` / ``SEND_LONG``
(an event stream that ends with the answer, or a long-lived one that ends when the client goes)
until the stream ends. ``CLOSED``: we closed the connection (or it is lost).

The client's half-close is a fact beside the states, not one of them (h11 keeps it the same way,
as a closed receive buffer): the complete requests already buffered are still read and answered.

A request read whole and answered at once by a replay (connection.py's fast path) goes from both
sides ``IDLE`` back to both ``IDLE``: that cycle records nothing, so the fast path only checks
:attr:`ConnectionState.idle` and makes no transition call.
"""

from __future__ import annotations

from ..protocol.wire_http11 import RequestHead, RequestReader

# One set of states; each side uses its subset (as h11 does).
IDLE, SEND_BODY, DONE, DISCARD, MUST_CLOSE, CLOSED, GONE, SEND_RESPONSE, SEND_LONG = range(9)
NAMES = ("IDLE", "SEND_BODY", "DONE", "DISCARD", "MUST_CLOSE", "CLOSED", "GONE", "SEND_RESPONSE", "SEND_LONG")
ANSWERING = (SEND_RESPONSE, SEND_BODY, SEND_LONG)  # our side while a request is being answered


class StateError(Exception):
    """A transition the HTTP/1.1 state of the connection does not allow (a bug of the caller)."""


class ConnectionState:
    """Both sides' states of one connection, the bytes read, and the exchange's keep-alive."""

    __slots__ = ("client", "discard_left", "eof", "idle", "keep", "ours", "reader")

    def __init__(self, max_body: int):
        self.reader = RequestReader(max_body)
        self.client = IDLE
        self.ours = IDLE
        self.idle = True  # both sides IDLE: the connection's fast path checks this one attribute
        self.keep = False  # the request being answered leaves the connection open after its reply
        self.eof = False  # the client half-closed: it sends no more
        self.discard_left = 0  # DISCARD: bytes of the refused body still to come (-1: unknown, chunked)

    def __repr__(self) -> str:
        return f"<ConnectionState client={NAMES[self.client]} ours={NAMES[self.ours]} eof={self.eof}>"

    def _set(self, client: int, ours: int) -> None:
        self.client = client
        self.ours = ours
        self.idle = client == IDLE and ours == IDLE

    def _refuse(self, what: str) -> StateError:
        return StateError(f"{what} with {self!r}")

    # -- queries ---------------------------------------------------------------------------------
    @property
    def may_read(self) -> bool:
        """Whether the next request (or the rest of the one begun) may be read now."""
        return self.ours == IDLE and (self.client == IDLE or self.client == SEND_BODY)

    @property
    def between_requests(self) -> bool:
        """Nothing read of a next request: the client's side IDLE with nothing buffered."""
        return self.client == IDLE and not self.reader.buf

    @property
    def busy(self) -> bool:
        """A request is being answered (its reply not yet all written)."""
        return self.ours in ANSWERING

    @property
    def client_gone(self) -> bool:
        """The client left, or half-closed while a long-lived stream is written (it reads no more)."""
        return self.client == GONE or self.client == CLOSED

    @property
    def closed(self) -> bool:
        """We closed the connection, or it is lost: nothing more is read."""
        return self.ours == CLOSED

    # -- the client's side -----------------------------------------------------------------------
    def next_head(self) -> bytes | None:
        """The bytes of the next complete head, consumed; None: not all here yet."""
        if not self.may_read or self.client != IDLE:
            raise self._refuse("reading a head")
        return self.reader.next_head()

    def head_admitted(self, head: RequestHead) -> None:
        """The head just read was admitted: its body is read next (BadRequest 413: too large)."""
        if self.client != IDLE or self.ours != IDLE:
            raise self._refuse("admitting a head")
        self.reader.expect_body(head)
        self._set(SEND_BODY, IDLE)

    def next_body(self) -> bytes | None:
        """The admitted head's body once complete (the request is then being answered); None: not yet."""
        if self.client != SEND_BODY or self.ours != IDLE:
            raise self._refuse("reading a body")
        head = self.reader.head
        assert head is not None
        body = self.reader.next_body()
        if body is not None:
            self.keep = head.keep_alive
            self._set(DONE, SEND_RESPONSE)
        return body

    def whole_request(self, keep_alive: bool) -> None:
        """A request arrived whole in one read (the connection parsed it without the reader): it
        is being answered."""
        if not self.idle:
            raise self._refuse("a whole request")
        self.keep = keep_alive
        self._set(DONE, SEND_RESPONSE)

    def head_refused(self, head: RequestHead) -> None:
        """The head just read was refused, its body never parsed: the refusal is answered next. A
        body all buffered is skipped (the connection may go on); one still coming is DISCARDed,
        and the connection closes after the reply."""
        if self.client != IDLE or self.ours != IDLE:
            raise self._refuse("refusing a head")
        left = self.reader.skip_body(head)
        self.discard_left = left
        self.keep = head.keep_alive and left == 0
        self._set(DONE if left == 0 else DISCARD, SEND_RESPONSE)

    def failed(self) -> None:
        """The bytes are not a request we serve (or did not arrive in time): what was read is
        forgotten, a refusal is answered, then the connection closes."""
        if self.ours != IDLE or self.client not in (IDLE, SEND_BODY):
            raise self._refuse("failing a request")
        self.reader.reset()
        self.keep = False
        self._set(MUST_CLOSE, SEND_RESPONSE)

    def dropped(self, size: int) -> bool:
        """``size`` more bytes of the refused body arrived (dropped); True once all of it has (a
        known length: the client's side is then MUST_CLOSE)."""
        if self.client != DISCARD:
            raise self._refuse("dropping body bytes")
        if self.discard_left > 0:
            self.discard_left -= min(size, self.discard_left)
            if self.discard_left == 0:
                self._set(MUST_CLOSE, self.ours)
                return True
        return False

    def peer_eof(self) -> bool:
        """The client half-closed. True: close now (nothing being answered, a refused body being
        dropped, or a long-lived stream, whose client is then gone); else answer what was read first."""
        self.eof = True
        if self.ours == SEND_LONG:
            self._set(GONE, SEND_LONG)
            return True
        return self.ours == IDLE or self.client == DISCARD

    # -- our side --------------------------------------------------------------------------------
    def stream_opened(self, long_lived: bool, chunked: bool) -> None:
        """The reply is an event stream, its head written: chunked on HTTP/1.1, else delimited by
        the close (the connection cannot stay open after it)."""
        if self.ours != SEND_RESPONSE:
            raise self._refuse("opening a stream")
        self.keep = self.keep and chunked
        if long_lived:  # a client that half-closed already is gone for it
            self._set(GONE if self.eof else self.client, SEND_LONG)
        else:
            self._set(self.client, SEND_BODY)

    def reply_done(self, keep: bool) -> bool:
        """The reply (whole, or a stream's end) is written. ``keep``: the connection stays open for the
        next request (both sides IDLE), else our side is MUST_CLOSE (and the client's too, unless a
        refused body is still being dropped). Returns whether it stays open: never once closed."""
        ours = self.ours
        if ours == CLOSED:  # the answer of a request arrived after we closed, or the client left
            return False
        if ours not in ANSWERING:
            raise self._refuse("a reply done")
        if not keep or self.client == GONE:  # (a long-lived stream's client that left)
            self._set(self.client if self.client in (DISCARD, GONE) else MUST_CLOSE, MUST_CLOSE)
            return False
        if not self.keep or self.client != DONE:
            raise self._refuse("keeping the connection open")
        self._set(IDLE, IDLE)
        return True

    def close(self) -> None:
        """We close the connection (at any point): nothing more is read."""
        self._set(self.client, CLOSED)

    def lost(self) -> None:
        """The connection is gone (both sides)."""
        self._set(CLOSED, CLOSED)
