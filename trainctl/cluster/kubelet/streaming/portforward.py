"""``portforward``: TCP connections to a pod's ports, multiplexed over one SPDY session.

kubectl (``portforward.k8s.io``) opens two SPDY streams for each local connection it
accepts, both with the headers ``port`` and ``requestID``: first ``streamType: error``, then
``streamType: data``. The kubelet answers each stream, dials the pod's port (through the
pod network, :mod:`trainctl.cluster.network.podnet`) and copies bytes both ways on the data
stream, half-closing each side as the other ends. A port it cannot reach is said on the
error stream, which kubectl prints.

The Python ``kubernetes`` client's ``portforward()`` speaks the older WebSocket form instead
(``v4.channel.k8s.io``, the ports in the query): one connection per port for the life of the
WebSocket, port ``i`` on channels ``2i`` (data) and ``2i + 1`` (error), each opened by the
server with the port number (two bytes, little-endian); :func:`serve_channels`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Optional

from aiohttp import WSMsgType, web

from trainctl.cluster.kubelet.streaming import spdy

log = logging.getLogger(__name__)

PROTOCOL = "portforward.k8s.io"
TUNNEL_PROTOCOL = "SPDY/3.1+" + PROTOCOL  # SPDY inside WebSocket binary messages (kubectl 1.31 on)
CHANNEL_PROTOCOLS = ("v4.channel.k8s.io", "channel.k8s.io")  # the one-connection-per-port WebSocket form
DIAL_TIMEOUT = 10.0
READ_SIZE = 256 * 1024

Dial = Callable[[int], socket.socket]  # blocking: a connected socket to the pod's port


@dataclass
class _Forward:
    """One forwarded connection: a pair of streams and the pod-side socket."""

    request_id: str
    port: int = 0
    error_stream: int = 0
    data_stream: int = 0
    writer: Optional[asyncio.StreamWriter] = None
    pending: list[bytes] = field(default_factory=list)  # from the client before the pod answered
    client_done: bool = False
    task: Optional[asyncio.Task[None]] = None


class Forwarder:
    """The server's side of one port-forward session."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]], dial: Dial, describe: str) -> None:
        self._send_raw = send
        self._dial = dial
        self._describe = describe  # "pod NAME, uid UID", for error messages
        self._session = spdy.Session()
        self._lock = asyncio.Lock()
        self._forwards: dict[str, _Forward] = {}
        self._by_stream: dict[int, _Forward] = {}

    async def _send(self, make: Callable[[], bytes]) -> None:
        # Frames are made under the lock: header blocks share one compression stream, so
        # they must reach the client in the order they were compressed.
        async with self._lock:
            with contextlib.suppress(ConnectionError):
                await self._send_raw(make())

    async def receive(self, data: bytes) -> None:
        for event in self._session.feed(data):
            if isinstance(event, spdy.StreamOpened):
                await self._opened(event)
            elif isinstance(event, spdy.Data):
                await self._data(event)
            elif isinstance(event, spdy.Reset):
                self._reset(event.stream_id)
            elif isinstance(event, spdy.Ping):
                await self._send(functools.partial(self._session.ping_frame, event.ping_id))

    async def _opened(self, event: spdy.StreamOpened) -> None:
        stream_id, headers = event.stream_id, event.headers
        await self._send(lambda: self._session.reply_frame(stream_id))
        request_id = headers.get("requestid", str(stream_id))
        kind = headers.get("streamtype", "")
        try:
            port = int(headers.get("port", ""))
        except ValueError:
            port = 0
        forward = self._forwards.setdefault(request_id, _Forward(request_id))
        self._by_stream[stream_id] = forward
        if kind == "error":
            forward.error_stream = stream_id
        elif kind == "data":
            forward.data_stream, forward.port = stream_id, port
            forward.task = asyncio.create_task(self._forward(forward))
        else:
            await self._send(lambda: self._session.reset_frame(stream_id, spdy.PROTOCOL_ERROR))

    async def _data(self, event: spdy.Data) -> None:
        forward = self._by_stream.get(event.stream_id)
        if forward is None or event.stream_id != forward.data_stream:
            return  # kubectl writes nothing on the error stream but its end
        if forward.writer is None:
            forward.pending.append(event.data)
            forward.client_done = forward.client_done or event.fin
            return
        await self._to_pod(forward, event.data, event.fin)

    @staticmethod
    async def _to_pod(forward: _Forward, data: bytes, fin: bool) -> None:
        writer = forward.writer
        assert writer is not None
        if writer.is_closing():
            return
        try:
            if data:
                writer.write(data)
                await writer.drain()
            if fin and writer.can_write_eof():
                writer.write_eof()
        except ConnectionError:
            writer.close()

    def _reset(self, stream_id: int) -> None:
        forward = self._by_stream.get(stream_id)
        if forward is not None and forward.task is not None:
            forward.task.cancel()

    async def _forward(self, forward: _Forward) -> None:
        if not 0 < forward.port < 65536:
            await self._fail(forward, f"invalid port {forward.port or 'header'}")
            return
        try:
            sock = await asyncio.to_thread(self._dial, forward.port)
            reader, writer = await asyncio.open_connection(sock=sock)
        except OSError as exc:
            await self._fail(forward, f"error forwarding port {forward.port} to {self._describe}: {exc}")
            return
        forward.writer = writer
        try:
            for chunk in forward.pending:
                await self._to_pod(forward, chunk, False)
            if forward.client_done:
                await self._to_pod(forward, b"", True)
            forward.pending.clear()
            while chunk := await reader.read(READ_SIZE):
                await self._send(functools.partial(self._session.data_frames, forward.data_stream, chunk))
        except ConnectionError:
            pass
        finally:
            writer.close()
            await self._finish(forward)

    async def _fail(self, forward: _Forward, message: str) -> None:
        log.info("port-forward: %s", message)
        if forward.error_stream:
            await self._send(lambda: self._session.data_frames(forward.error_stream, message.encode(), fin=True))
            forward.error_stream = 0
        await self._finish(forward)

    async def _finish(self, forward: _Forward) -> None:
        """Half-close both streams: the pod's side of the connection ended."""
        for stream_id in (forward.data_stream, forward.error_stream):
            if stream_id:
                await self._send(functools.partial(self._session.data_frames, stream_id, b"", fin=True))
        self._forwards.pop(forward.request_id, None)

    async def close(self) -> None:
        """The session ended: so does every connection it carried."""
        tasks = [f.task for f in self._forwards.values() if f.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def serve_channels(ws: web.WebSocketResponse, ports: list[int], dial: Dial, describe: str) -> None:
    """The WebSocket form: each port dialed once, its bytes on its pair of channels."""
    writers: dict[int, asyncio.StreamWriter] = {}
    pumps: list[asyncio.Task[None]] = []

    async def send(channel: int, data: bytes) -> None:
        with contextlib.suppress(ConnectionError):
            await ws.send_bytes(bytes([channel]) + data)

    async def pump(index: int, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(READ_SIZE):
                await send(2 * index, chunk)

    for index, port in enumerate(ports):
        await send(2 * index, struct.pack("<H", port))
        await send(2 * index + 1, struct.pack("<H", port))
    for index, port in enumerate(ports):
        try:
            sock = await asyncio.to_thread(dial, port)
            reader, writers[index] = await asyncio.open_connection(sock=sock)
        except OSError as exc:
            await send(2 * index + 1, f"error forwarding port {port} to {describe}: {exc}".encode())
            continue
        pumps.append(asyncio.create_task(pump(index, reader)))
    async def everything_read() -> None:
        await asyncio.gather(*pumps)

    waits = [asyncio.create_task(everything_read()), asyncio.create_task(_from_client(ws, writers))]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (*waits, *pumps):
            task.cancel()
        for writer in writers.values():
            writer.close()
        await ws.close()


async def _from_client(ws: web.WebSocketResponse, writers: dict[int, asyncio.StreamWriter]) -> None:
    async for message in ws:
        if message.type != WSMsgType.BINARY or not message.data or message.data[0] % 2:
            continue
        writer = writers.get(message.data[0] // 2)
        if writer is not None and not writer.is_closing():
            try:
                writer.write(message.data[1:])
                await writer.drain()
            except ConnectionError:
                writer.close()
