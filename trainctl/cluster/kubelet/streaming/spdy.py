"""SPDY/3.1 framing, the server's half, without I/O: what ``kubectl port-forward`` speaks.

kubectl multiplexes every forwarded connection over one SPDY/3.1 session (tunnelled in
WebSocket binary messages, or on the upgraded HTTP connection itself). No maintained Python
library speaks SPDY, and port-forward needs only a small part of it, written here from the
protocol draft: frames in (:meth:`Session.feed` returns what happened), frames out (the
``*_frame`` methods return bytes to send). Header blocks are zlib streams primed with the
draft's fixed dictionary, one stream per direction for the whole session. Flow control
(WINDOW_UPDATE) is read and ignored, as kubectl's spdystream does.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
# RST_STREAM status codes.
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, CANCEL, INTERNAL_ERROR = 1, 2, 3, 5, 6
MAX_DATA = 1 << 18  # bytes per DATA frame written (the protocol allows 2^24 - 1)

# The compression dictionary of SPDY/3 (draft 3, section 2.6.10.1): length-prefixed words,
# then a run of common header values.
_DICTIONARY_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset",
    "accept-encoding", "accept-language", "accept-ranges", "age", "allow", "authorization",
    "cache-control", "connection", "content-base", "content-encoding", "content-language",
    "content-length", "content-location", "content-md5", "content-range", "content-type", "date",
    "etag", "expect", "expires", "from", "host", "if-match", "if-modified-since", "if-none-match",
    "if-range", "if-unmodified-since", "last-modified", "location", "max-forwards", "pragma",
    "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after", "server", "te",
    "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public",
    "set-cookie", "keep-alive", "origin",
)
_DICTIONARY_TAIL = (
    "1001012012022052063003023033043053063074024054064074084094104114124134144154164175025045"
    "05203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401"
    " Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 S"
    "ervice UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, We"
    "d, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xm"
    "l,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdc"
    "hcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = (b"".join(struct.pack(">I", len(word)) + word.encode() for word in _DICTIONARY_WORDS)
              + _DICTIONARY_TAIL.encode())


class ProtocolError(Exception):
    """The peer broke the framing: the session cannot go on."""


@dataclass
class StreamOpened:
    stream_id: int
    headers: dict[str, str]  # names lowercased, as SPDY/3 requires; repeated values joined by NUL
    fin: bool


@dataclass
class Data:
    stream_id: int
    data: bytes
    fin: bool


@dataclass
class Reset:
    stream_id: int
    status: int


@dataclass
class Ping:
    ping_id: int


@dataclass
class GoAway:
    last_stream_id: int


Event = StreamOpened | Data | Reset | Ping | GoAway


@dataclass
class Session:
    """One SPDY/3.1 session as seen by the server."""

    _buffer: bytearray = field(default_factory=bytearray)
    _inflate: "zlib._Decompress" = field(default_factory=lambda: zlib.decompressobj(zdict=DICTIONARY))
    _deflate: "zlib._Compress" = field(default_factory=lambda: zlib.compressobj(zlib.Z_BEST_COMPRESSION, zdict=DICTIONARY))

    def feed(self, data: bytes) -> list[Event]:
        """The events carried by ``data`` and what came before it (frames may arrive split)."""
        self._buffer += data
        events: list[Event] = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head, payload = bytes(self._buffer[:8]), bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            event = self._frame(head, payload)
            if event is not None:
                events.append(event)
        return events

    def _frame(self, head: bytes, payload: bytes) -> Event | None:
        flags = head[4]
        if not head[0] & 0x80:  # a DATA frame
            return Data(int.from_bytes(head[:4], "big") & 0x7FFFFFFF, payload, bool(flags & FLAG_FIN))
        version, kind = struct.unpack(">HH", head[:4])
        if version & 0x7FFF != VERSION:
            raise ProtocolError(f"SPDY version {version & 0x7FFF} is not spoken here")
        if kind == SYN_STREAM:
            if len(payload) < 10:
                raise ProtocolError("short SYN_STREAM")
            stream_id = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            return StreamOpened(stream_id, self._headers(payload[10:]), bool(flags & FLAG_FIN))
        if kind == RST_STREAM and len(payload) >= 8:
            stream_id, status = struct.unpack(">II", payload[:8])
            return Reset(stream_id & 0x7FFFFFFF, status)
        if kind == PING and len(payload) >= 4:
            return Ping(int.from_bytes(payload[:4], "big"))
        if kind == GOAWAY and len(payload) >= 4:
            return GoAway(int.from_bytes(payload[:4], "big") & 0x7FFFFFFF)
        if kind in (SYN_REPLY, HEADERS) and len(payload) >= 4:
            self._headers(payload[4:])  # keeps the shared decompressor in step
        return None  # SETTINGS, WINDOW_UPDATE and anything newer: nothing to do

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as exc:
            raise ProtocolError(f"header block: {exc}") from None
        headers: dict[str, str] = {}
        try:
            count, offset = struct.unpack_from(">I", raw)[0], 4
            for _ in range(count):
                values = []
                for _part in range(2):
                    size = struct.unpack_from(">I", raw, offset)[0]
                    values.append(raw[offset + 4:offset + 4 + size].decode("utf-8", "replace"))
                    offset += 4 + size
                headers[values[0].lower()] = values[1]
        except struct.error:
            raise ProtocolError("truncated header block") from None
        return headers

    def _control(self, kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    def reply_frame(self, stream_id: int, headers: dict[str, str] | None = None, fin: bool = False) -> bytes:
        pairs = sorted((headers or {}).items())
        raw = struct.pack(">I", len(pairs)) + b"".join(
            struct.pack(">I", len(name)) + name.encode() + struct.pack(">I", len(value.encode())) + value.encode()
            for name, value in pairs)
        block = self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
        return self._control(SYN_REPLY, FLAG_FIN if fin else 0, struct.pack(">I", stream_id) + block)

    def data_frames(self, stream_id: int, data: bytes, fin: bool = False) -> bytes:
        """``data`` on a stream, in frames of at most :data:`MAX_DATA` bytes; ``fin`` half-closes it."""
        frames = []
        chunks = [data[i:i + MAX_DATA] for i in range(0, len(data), MAX_DATA)] or [b""]
        for index, chunk in enumerate(chunks):
            last = fin and index == len(chunks) - 1
            frames.append(struct.pack(">II", stream_id, ((FLAG_FIN if last else 0) << 24) | len(chunk)) + chunk)
        return b"".join(frames)

    def reset_frame(self, stream_id: int, status: int = CANCEL) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def ping_frame(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway_frame(self, last_stream_id: int) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_stream_id, 0))
