"""One exchange, driven the same way by every carrier (docs/DESIGN.md, "Carriers").

A carrier moves bytes; the :class:`ExchangeDriver` owns the sequence every carrier used to write
again: admit (unless the carrier did), answer inline on the carrier's loop, else hand the request to
the worker pool; then write the reply through the carrier's :class:`Port`: a whole reply, or an
event stream pumped as its waker fires (with a keepalive comment when it is quiet), until it ends
or the client goes. Its guarantees, on every path (a handler that raises, a pool that is shut
down, a client that leaves, a cancel):

- exactly one *final* call per exchange: ``send_reply``, or the one ``open_stream`` /
  ``send_events`` with ``end=True``; the port is never called after it, so a carrier releases
  what it holds for the exchange (an in-flight slot, a connection's turn) there and only there;
- ``stream_closed`` for every stream the server handed out, opened or refused.

A new carrier is one small file: a ``Port`` subclass (four writes and a ``gone`` flag), and a
call of :meth:`ExchangeDriver.start` per request (:meth:`ExchangeDriver.serve` for a carrier
that awaits each exchange).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Protocol

from .. import hop_trace
from ..protocol.exchange import HttpReply, HttpRequest, carrier_error
from ..protocol.streams import Stream

log = logging.getLogger(__name__)
KEEPALIVE_COMMENT = b": keepalive\n\n"
STOPPING = "Service unavailable: the server is stopping"
KEEPALIVE_SECONDS = 15.0  # a quiet stream gets KEEPALIVE_COMMENT this often (unless its port says otherwise)


if TYPE_CHECKING:  # a type only: not made at import (DESIGN, "Loading, eighth cut")

    class DrivenServer(Protocol):
        """What the driver calls of the server it drives (``protocol.server.McpServer``)."""

        def admit(self, headers: dict[str, str], method: str | None = None) -> HttpReply | None: ...

        def answer_inline(self, req: HttpRequest, remember: bool = False) -> HttpReply | None: ...

        def handle(self, req: HttpRequest) -> HttpReply: ...

        def stream_closed(self, stream: Stream) -> None: ...


class Port:
    """One exchange's way back to its client: what a carrier implements.

    The driver calls either ``send_reply`` once, or ``open_stream`` and then ``send_events`` until
    a call with ``end=True`` (possibly ``open_stream`` itself). Stream writes may return an
    awaitable: the driver waits on it before writing more (the client reads slowly). ``headers``
    are the reply's: the port adds what its framing of an event stream needs (a Content-Type).
    """

    keepalive: float | None = KEEPALIVE_SECONDS  # seconds of a quiet stream before a keepalive comment; None: never
    gone: bool = False  # the client left (or reads no more): a stream ends now; the final call still comes
    exchange: Exchange | None = None  # set by the driver when the exchange goes on after start()

    def send_reply(self, reply: HttpReply) -> None:
        """A whole reply (status, headers, body): the exchange's final call."""
        raise NotImplementedError

    def open_stream(self, status: int, headers: dict[str, str], events: bytes, end: bool) -> Awaitable[None] | None:
        """The head of an event stream, with the events queued so far (maybe none); ``end``: also its end."""
        raise NotImplementedError

    def send_events(self, events: bytes, end: bool) -> Awaitable[None] | None:
        """More of the stream (maybe nothing); ``end``: the stream ends after them."""
        raise NotImplementedError

    def refuse_stream(self, stream: Stream) -> HttpReply | None:
        """A refusal to send instead of opening ``stream`` (a carrier's bound on open streams), or None."""
        return None


class Exchange:
    """One request handed off by the driver (to the pool, or as a stream): what a carrier holds to
    end it early. The driver keeps it; a carrier needs it only to :meth:`cancel`."""

    __slots__ = ("done", "driver", "ended", "parked", "port", "stream", "wake", "written")

    def __init__(self, driver: ExchangeDriver, port: Port):
        self.driver = driver
        self.port = port
        self.stream: Stream | None = None  # set once the reply is a stream being written
        self.ended = False  # the final call was made
        self.wake: asyncio.Event | None = None
        self.parked = False  # the pump waits for events (nothing of its own being written): the waker writes
        self.written: Awaitable[None] | None = None  # what the waker wrote, for the pump to wait on
        self.done: asyncio.Future[None] | None = None  # for serve(): resolved by the final call
        port.exchange = self

    def cancel(self) -> None:
        """The client left or asked to end the stream: close it now (``stream_closed``, then the
        port's final call with nothing more). A request still being answered is not affected:
        its answer comes, and the port's ``gone`` says whether it is written."""
        if self.stream is not None and not self.ended:
            self.driver._end(self, b"")


class ExchangeDriver:
    """Drives exchanges between carriers' ports and one server (see the module docstring). Every
    call, and ``Exchange.cancel``, is made on the carrier's event loop: the one the exchange lives on."""

    def __init__(
        self,
        server: DrivenServer,
        executor: Executor | None,
        inline: bool = True,
    ):
        self.server = server
        self.executor = executor  # None: the loop's default pool
        # False: every request goes to a worker (a server whose resources live behind other hops,
        # like the fronts, must not answer even a cheap method on the carrier's loop).
        self.inline = inline
        self.tasks: set[asyncio.Task[None]] = set()  # the stream pumps running
        self.in_pool = 0  # requests handed to the worker pool and not yet back (held_stream.py reads it)

    def _answer_first(self, req: HttpRequest, remember: bool) -> HttpReply | None:
        """Admission (unless the carrier did it) and the inline answer; None: the pool answers."""
        try:
            if not req.admitted:
                reply = self.server.admit(req.headers, req.method)
                req.admitted = reply is None
                if reply is not None:
                    return reply
            return self.server.answer_inline(req, remember) if self.inline else None
        except Exception:  # a bug, not the client's input: answered all the same
            log.exception("answering a request inline failed")
            return carrier_error(500, "Internal error")

    def start(self, port: Port, req: HttpRequest, remember: bool = False) -> Exchange | None:
        """Drive one request. Returns the exchange (also ``port.exchange``) when
        it goes on after this call (to the pool, or a stream), None when its final call was made."""
        reply = self._answer_first(req, remember)
        if reply is not None:
            if reply.stream is None:  # the usual case, written out here: it is the hot path
                port.send_reply(reply)
                if reply.after_send is not None:
                    reply.after_send()
                return None
            ex = Exchange(self, port)
            self._deliver(ex, reply)
            return ex
        loop = asyncio.get_running_loop()
        ex = Exchange(self, port)
        try:
            future = loop.run_in_executor(self.executor, self.server.handle, req)
        except RuntimeError:  # the pool is shut down: the server is stopping
            self._final(ex, lambda: self._whole(port, carrier_error(503, STOPPING)))
            return None
        self.in_pool += 1
        future.add_done_callback(lambda f: self._handled(ex, f))
        return ex

    async def serve(self, port: Port, req: HttpRequest) -> None:
        """``start``, then wait until the exchange's final call was made (a carrier whose request
        lives in a coroutine, like a tornado handler; ``port.exchange.cancel()`` ends it early)."""
        ex = self.start(port, req)
        if ex is None or ex.ended:
            return
        ex.done = asyncio.get_running_loop().create_future()
        await ex.done

    def _handled(self, ex: Exchange, future: asyncio.Future[HttpReply]) -> None:
        self.in_pool -= 1
        if future.cancelled():  # the pool was shut down before it ran: the server is stopping
            self._final(ex, lambda: self._whole(ex.port, carrier_error(503, STOPPING)))
            return
        if future.exception() is not None:  # handle() never raises; a dying pool may
            self._final(ex, lambda: self._whole(ex.port, carrier_error(500, "Internal error")))
            return
        self._deliver(ex, future.result())

    def _deliver(self, ex: Exchange, reply: HttpReply) -> None:
        """``_answer``, and when a port's write fails (a bug) the exchange still ends: a stream is
        closed at the server, the port gets its final call."""
        try:
            self._answer(ex, reply)
        except Exception:
            log.exception("writing a reply failed")
            if ex.stream is not None:
                self._end(ex, b"")
            else:
                self._final(ex, lambda: self._whole(ex.port, carrier_error(500, "Internal error")))

    def _whole(self, port: Port, reply: HttpReply) -> None:
        port.send_reply(reply)
        if reply.after_send is not None:
            reply.after_send()

    def _final(self, ex: Exchange, call: Any) -> None:
        """Make the exchange's final call once; whoever awaits it (serve) is told."""
        if ex.ended:
            return
        ex.ended = True
        try:
            call()
        finally:
            if ex.done is not None and not ex.done.done():
                ex.done.set_result(None)

    def _answer(self, ex: Exchange, reply: HttpReply) -> None:
        stream = reply.stream
        if stream is None:
            self._final(ex, lambda: self._whole(ex.port, reply))
            return
        port = ex.port
        refusal = port.refuse_stream(stream)
        if refusal is not None:
            self.server.stream_closed(stream)  # (which closes it)
            self._final(ex, lambda: self._whole(port, refusal))
            return
        ex.stream = stream
        closed = stream.closed or port.gone
        events = b"".join(stream.drain())  # what is there already goes out with the head
        if closed:
            self.server.stream_closed(stream)
            self._final(ex, lambda: port.open_stream(reply.status, reply.headers, events, True))
            return
        waiting = port.open_stream(reply.status, reply.headers, events, False)
        ex.wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        if hop_trace.ON:
            stream.set_waker(lambda: (hop_trace.stamp("stream.push"), loop.call_soon_threadsafe(self._woken, ex)))
        else:
            stream.set_waker(lambda: loop.call_soon_threadsafe(self._woken, ex))
        task = loop.create_task(self._pump(ex, waiting))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _woken(self, ex: Exchange) -> None:
        """The stream has events (on the loop): written here and now when the pump is parked, a loop
        pass before the pump itself would run (it then waits on the write: back-pressure holds).
        The stream's end and a client gone are the pump's, as is every write while one is pending."""
        stream, wake = ex.stream, ex.wake
        assert stream is not None and wake is not None
        if ex.parked and ex.written is None and not ex.ended and not ex.port.gone and not stream.closed:
            events = stream.drain()
            if events:
                data = b"".join(events)
                if hop_trace.ON:
                    hop_trace.stamp("stream.write", hop_trace.uri_in(data))
                try:
                    ex.written = ex.port.send_events(data, False)
                except Exception:
                    log.exception("writing a stream's events failed")
                    self._end(ex, b"")
                    return
        wake.set()

    async def _pump(self, ex: Exchange, waiting: Awaitable[None] | None) -> None:
        """Write the stream's events as they come, until it closes, the client goes or it is cancelled."""
        port, stream, wake = ex.port, ex.stream, ex.wake
        assert stream is not None and wake is not None
        keepalive = port.keepalive
        try:
            if waiting is not None:
                await waiting
            while not ex.ended:
                closed = stream.closed
                events = stream.drain()
                if closed or port.gone:  # what there is rides on the final call
                    self._end(ex, b"".join(events))
                    return
                if events:
                    data = b"".join(events)
                    if hop_trace.ON:
                        hop_trace.stamp("stream.write", hop_trace.uri_in(data))
                    waiting = port.send_events(data, False)
                    if waiting is not None:
                        await waiting
                    if hop_trace.ON:
                        hop_trace.stamp("stream.flushed", hop_trace.uri_in(data))
                try:
                    ex.parked = True
                    if keepalive is None:
                        await wake.wait()
                    else:
                        await asyncio.wait_for(wake.wait(), keepalive)
                except asyncio.TimeoutError:
                    if not ex.ended and not port.gone:
                        waiting = port.send_events(KEEPALIVE_COMMENT, False)
                        if waiting is not None:
                            await waiting
                finally:
                    ex.parked = False
                wake.clear()
                written, ex.written = ex.written, None
                if written is not None:  # the waker wrote: wait until it is out, as for the pump's own
                    await written
        finally:
            written, ex.written = ex.written, None
            close = getattr(written, "close", None)  # a coroutine the pump will not await now
            if close is not None:
                close()
            self._end(ex, b"")

    def _end(self, ex: Exchange, events: bytes) -> None:
        """The stream is over: the server is told, then the port gets its final call (once)."""
        if ex.ended:
            return
        stream = ex.stream
        assert stream is not None
        try:
            self.server.stream_closed(stream)
        except Exception:
            log.exception("closing a stream failed")
        if ex.wake is not None:
            ex.wake.set()  # a pump waiting for events wakes and returns
        self._final(ex, lambda: ex.port.send_events(events, True))
