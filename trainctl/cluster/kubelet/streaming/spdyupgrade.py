"""SPDY/3.1 upgrades: what kubectl before 1.30 speaks (before 1.31 for port-forward), and
what a newer kubectl falls back to when a WebSocket upgrade fails.

The client asks with ``Connection: Upgrade``, ``Upgrade: SPDY/3.1`` and the protocols it
speaks in ``X-Stream-Protocol-Version``; the server answers 101 naming the one it chose, and
the connection then carries one SPDY session. For exec and attach (``v4.channel.k8s.io``) the
client opens one stream per standard stream, named by its ``streamType`` header (``error``,
``stdin``, ``stdout``, ``stderr``, ``resize``), and the outcome is a ``metav1.Status`` on
``error``, as on WebSocket channel 3. For port-forward (``portforward.k8s.io``) the streams
are :mod:`.portforward`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any, Optional

from aiohttp import web

from trainctl.cluster.kubelet.streaming import portforward, spdy
from trainctl.cluster.kubelet.streaming.remotecommand import ERROR, RESIZE, STDERR, STDIN, STDOUT, Options, sizes

UPGRADE = "SPDY/3.1"
EXEC_PROTOCOLS = ("v4.channel.k8s.io",)
STREAMS_TIMEOUT = 30.0  # kubectl opens its streams at once; give up on a client that does not
_CHANNELS = {"error": ERROR, "stdin": STDIN, "stdout": STDOUT, "stderr": STDERR, "resize": RESIZE}


def requested(request: web.BaseRequest) -> bool:
    return (request.headers.get("Upgrade", "").lower() == UPGRADE.lower()
            and "upgrade" in request.headers.get("Connection", "").lower())


def chosen(request: web.BaseRequest, supported: tuple[str, ...]) -> Optional[str]:
    """The first protocol the client offers that is ``supported``; None when there is none."""
    offered = [p.strip() for value in request.headers.getall("X-Stream-Protocol-Version", []) for p in value.split(",")]
    return next((p for p in offered if p in supported), None)


class _Wire:
    """The upgraded connection: bytes in as they arrive, out through the transport."""

    def __init__(self, request: web.BaseRequest) -> None:
        self.incoming: asyncio.Queue[Optional[bytes]] = asyncio.Queue()
        self._protocol = request.protocol
        self._transport = request.transport
        # Before the 101 goes out: whatever the client sends after it is SPDY, never HTTP.
        self._protocol.set_parser(self)  # type: ignore[arg-type]  # any feed_data/feed_eof will do
        self._protocol.keep_alive(False)

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.incoming.put_nowait(data)
        return False, b""

    def feed_eof(self) -> None:
        self.incoming.put_nowait(None)

    async def write(self, data: bytes) -> None:
        if self._transport is None or self._transport.is_closing():
            raise ConnectionResetError("the client went away")
        self._transport.write(data)
        await self._protocol._drain_helper()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def _switch(request: web.BaseRequest, protocol: str) -> tuple[web.StreamResponse, _Wire]:
    wire = _Wire(request)
    response = web.StreamResponse(status=101, headers={"Connection": "Upgrade", "Upgrade": UPGRADE,
                                                       "X-Stream-Protocol-Version": protocol})
    await response.prepare(request)
    return response, wire


class SpdyStreams:
    """An exec or attach on SPDY streams (a :class:`~.remotecommand.Connection`)."""

    def __init__(self, wire: _Wire) -> None:
        self._wire = wire
        self._session = spdy.Session()
        self._lock = asyncio.Lock()
        self.streams: dict[int, int] = {}  # channel -> stream id
        self._early: list[spdy.Event] = []  # what came with the streams, before anyone listened

    async def _send(self, make: Callable[[], bytes]) -> None:
        async with self._lock:  # header blocks share one compression stream: frames in order
            with contextlib.suppress(ConnectionError):
                await self._wire.write(make())

    async def open(self, expected: set[int]) -> bool:
        """Answer the client's streams until every ``expected`` channel has one."""
        async def gather() -> bool:
            while not expected <= set(self.streams):
                data = await self._wire.incoming.get()
                if data is None:
                    return False
                for event in self._session.feed(data):
                    if isinstance(event, spdy.StreamOpened):
                        await self._send(functools.partial(self._session.reply_frame, event.stream_id))
                        channel = _CHANNELS.get(event.headers.get("streamtype", ""))
                        if channel is not None:
                            self.streams[channel] = event.stream_id
                    else:
                        self._early.append(event)
            return True
        try:
            return await asyncio.wait_for(gather(), STREAMS_TIMEOUT)
        except (asyncio.TimeoutError, spdy.ProtocolError):
            return False

    async def send(self, channel: int, data: bytes) -> None:
        stream = self.streams.get(channel)
        if stream is not None:
            await self._send(functools.partial(self._session.data_frames, stream, data))

    async def finish(self, status: dict[str, Any]) -> None:
        for channel in (STDOUT, STDERR):
            if channel in self.streams:
                await self._send(functools.partial(self._session.data_frames, self.streams[channel], b"", fin=True))
        error = self.streams.get(ERROR)
        if error is not None:
            body = b"" if status.get("status") == "Success" else json.dumps(status).encode()
            await self._send(functools.partial(self._session.data_frames, error, body, fin=True))
        await self._send(functools.partial(self._session.goaway_frame, max(self.streams.values(), default=0)))
        self._wire.close()

    async def receive(self, on_stdin: Callable[[bytes], Awaitable[None]], on_stdin_closed: Callable[[], None],
                      on_resize: Callable[[int, int], None]) -> None:
        stdin, resize = self.streams.get(STDIN), self.streams.get(RESIZE)

        async def handle(event: spdy.Event) -> None:
            if isinstance(event, spdy.Data) and event.stream_id == stdin:
                if event.data:
                    await on_stdin(event.data)
                if event.fin:
                    on_stdin_closed()
            elif isinstance(event, spdy.Reset) and event.stream_id == stdin:
                on_stdin_closed()
            elif isinstance(event, spdy.Data) and event.stream_id == resize:
                for width, height in sizes(event.data):
                    on_resize(width, height)
            elif isinstance(event, spdy.Ping):
                await self._send(functools.partial(self._session.ping_frame, event.ping_id))

        for event in self._early:
            await handle(event)
        self._early.clear()
        while (data := await self._wire.incoming.get()) is not None:
            try:
                events = self._session.feed(data)
            except spdy.ProtocolError:
                return
            for event in events:
                await handle(event)


async def accept_streams(request: web.BaseRequest, options: Options,
                         protocol: str) -> tuple[web.StreamResponse, Optional[SpdyStreams]]:
    """Switch to SPDY and wait for the streams ``options`` call for (None: they never came)."""
    response, wire = await _switch(request, protocol)
    streams = SpdyStreams(wire)
    expected = {ERROR} | {channel for channel, wanted in ((STDIN, options.stdin), (STDOUT, options.stdout),
                                                           (STDERR, options.stderr), (RESIZE, options.tty)) if wanted}
    if not await streams.open(expected):
        wire.close()
        return response, None
    return response, streams


async def serve_port_forward(request: web.BaseRequest, dial: portforward.Dial, describe: str) -> web.StreamResponse:
    response, wire = await _switch(request, portforward.PROTOCOL)
    forwarder = portforward.Forwarder(wire.write, dial, describe)
    try:
        while (data := await wire.incoming.get()) is not None:
            await forwarder.receive(data)
    except spdy.ProtocolError:
        pass
    finally:
        await forwarder.close()
        wire.close()
    return response
