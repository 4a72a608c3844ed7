"""SPDY/3.1 framing against frames built here the way kubectl's spdystream builds them."""

from __future__ import annotations

import hashlib
import struct
import zlib

import pytest
from multidict import MultiDict

from trainctl.cluster.kubelet.streaming import spdy
from trainctl.cluster.kubelet.streaming.remotecommand import Options, sizes


class Client:
    """The client's half: one compression stream for its header blocks, one to read ours."""

    def __init__(self) -> None:
        self.deflate = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zdict=spdy.DICTIONARY)
        self.inflate = zlib.decompressobj(zdict=spdy.DICTIONARY)

    def block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            raw += struct.pack(">I", len(name)) + name.encode() + struct.pack(">I", len(value)) + value.encode()
        return self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_stream(self, stream_id: int, headers: dict[str, str], fin: bool = False) -> bytes:
        payload = struct.pack(">IIBB", stream_id, 0, 0, 0) + self.block(headers)
        return struct.pack(">HHI", 0x8003, 1, ((1 if fin else 0) << 24) | len(payload)) + payload

    @staticmethod
    def data(stream_id: int, data: bytes, fin: bool = False) -> bytes:
        return struct.pack(">II", stream_id, ((1 if fin else 0) << 24) | len(data)) + data

    @staticmethod
    def control(kind: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8003, kind, len(payload)) + payload


def test_the_dictionary_is_the_drafts() -> None:
    # SPDY/3 draft, section 2.6.10.1 (1423 bytes)
    assert len(spdy.DICTIONARY) == 1423
    assert hashlib.sha256(spdy.DICTIONARY).hexdigest() == "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"


def test_a_port_forward_request_reads_as_two_streams_and_data() -> None:
    client, session = Client(), spdy.Session()
    wire = (client.syn_stream(1, {"streamtype": "error", "port": "8080", "requestid": "0"})
            + client.syn_stream(3, {"streamtype": "data", "port": "8080", "requestid": "0"})
            + client.data(3, b"GET / HTTP/1.0\r\n\r\n") + client.data(3, b"", fin=True)
            + client.control(spdy.PING, struct.pack(">I", 7))
            + client.control(spdy.WINDOW_UPDATE, struct.pack(">II", 3, 1000))
            + client.control(spdy.RST_STREAM, struct.pack(">II", 1, spdy.CANCEL)))
    events = []
    for byte in range(len(wire)):  # frames split anywhere still read whole
        events += session.feed(wire[byte:byte + 1])
    assert events == [
        spdy.StreamOpened(1, {"streamtype": "error", "port": "8080", "requestid": "0"}, False),
        spdy.StreamOpened(3, {"streamtype": "data", "port": "8080", "requestid": "0"}, False),
        spdy.Data(3, b"GET / HTTP/1.0\r\n\r\n", False),
        spdy.Data(3, b"", True),
        spdy.Ping(7),
        spdy.Reset(1, spdy.CANCEL),
    ]


def test_replies_share_one_compression_stream_and_each_block_is_whole() -> None:
    client, session = Client(), spdy.Session()
    for stream_id in (1, 3, 5):
        frame = session.reply_frame(stream_id)
        version, kind, flags_length = struct.unpack(">HHI", frame[:8])
        assert (version, kind) == (0x8003, spdy.SYN_REPLY)
        assert flags_length & 0xFFFFFF == len(frame) - 8
        assert struct.unpack(">I", frame[8:12])[0] == stream_id
        assert client.inflate.decompress(frame[12:]) == struct.pack(">I", 0)  # no headers, nothing left over
        assert client.inflate.unconsumed_tail == b""


def test_data_is_split_into_frames_and_fin_marks_the_last() -> None:
    session = spdy.Session()
    wire = session.data_frames(5, b"x" * (spdy.MAX_DATA + 10), fin=True)
    first, second = wire[:8 + spdy.MAX_DATA], wire[8 + spdy.MAX_DATA:]
    assert struct.unpack(">II", first[:8]) == (5, spdy.MAX_DATA)
    assert struct.unpack(">II", second[:8]) == (5, (1 << 24) | 10)
    assert struct.unpack(">II", session.data_frames(5, b"", fin=True)) == (5, 1 << 24)
    assert session.ping_frame(7) == struct.pack(">HHII", 0x8003, spdy.PING, 4, 7)


def test_another_version_or_a_broken_header_block_ends_the_session() -> None:
    with pytest.raises(spdy.ProtocolError):
        spdy.Session().feed(struct.pack(">HHI", 0x8002, spdy.PING, 4) + b"\0\0\0\1")
    with pytest.raises(spdy.ProtocolError):
        spdy.Session().feed(struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, 14) + b"\0" * 10 + b"junk")


def test_exec_options_and_resizes_as_kubectl_sends_them() -> None:
    query = MultiDict([("command", "sh"), ("command", "-c"), ("command", "echo hi"), ("stdin", "true"),
                       ("stdout", "true"), ("stderr", "true"), ("tty", "true")])
    options = Options.parse(query)
    assert options.command == ["sh", "-c", "echo hi"] and options.stdin and options.tty
    assert not options.stderr  # a terminal has one output stream
    assert sizes(b'{"Width":80,"Height":24}{"Width":100,"Height":30}\n') == [(80, 24), (100, 30)]
    assert sizes(b'{"Width":"x"}') == []
