"""One HTTP request handed on over a connection the caller dialled, its response streamed back.

The proxy subresources (``pods/NAME/proxy``, ``services/NAME/proxy``, ``nodes/NAME/proxy``)
take two such hops: the API server to the node's kubelet (whose TLS identity it checked), the
kubelet to the pod's address in the pod network. Each hop sends HTTP/1.0 with ``Connection:
close``, so a response ends with its connection and no chunked framing has to be undone on
the way back. What says who the caller is (``Authorization``, ``Impersonate-*``) never
leaves the API server, as kube-apiserver drops it once it has authenticated the request.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

READ_SIZE = 64 * 1024
HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT = 60.0
HOP_BY_HOP = frozenset(("connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                        "upgrade", "content-length", "host", "date", "server"))
_CREDENTIALS = frozenset(("authorization", "proxy-authorization"))


class BadResponse(Exception):
    """What came back was not an HTTP response."""


async def read_head(reader: asyncio.StreamReader) -> tuple[int, str, list[tuple[str, str]]]:
    """The status code, reason and headers of a response (its body left in ``reader``)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise BadResponse(f"no complete response head: {exc}") from None
    if len(head) > HEAD_LIMIT:
        raise BadResponse("response head too large")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or not status[0].startswith("HTTP/") or not status[1].isdigit():
        raise BadResponse(f"not an HTTP status line: {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers.append((name.strip(), value.strip()))
    return int(status[1]), status[2] if len(status) > 2 else "", headers


def forwarded_headers(request: web.BaseRequest) -> list[tuple[str, str]]:
    """The client's headers that go on: not the hop's own, not its credentials."""
    return [(name, value) for name, value in request.headers.items()
            if name.lower() not in HOP_BY_HOP and name.lower() not in _CREDENTIALS
            and not name.lower().startswith("impersonate-")]


async def relay(request: web.BaseRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                path: str, host: str) -> web.StreamResponse:
    """Send ``request`` (its method, ``path`` with query, headers and body) for ``host`` on
    the connection, then answer it with what comes back. Closes the connection."""
    try:
        body = await request.read()
        lines = [f"{request.method} {path} HTTP/1.0", f"Host: {host}", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in forwarded_headers(request)]
        if body or request.method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        code, reason, headers = await asyncio.wait_for(read_head(reader), HEAD_TIMEOUT)
        response = web.StreamResponse(status=code, reason=reason or None)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP:
                response.headers.add(name, value)
        await response.prepare(request)
        if request.method != "HEAD":
            while chunk := await reader.read(READ_SIZE):
                await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
