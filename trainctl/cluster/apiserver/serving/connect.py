"""``pods/exec``, ``pods/attach`` and ``pods/portforward``: connections proxied to the kubelet.

kube-apiserver runs nothing in a pod. It checks the request (the pod exists, runs on a node,
has not finished; the container is one of its own), finds the node's kubelet through the
Node object (an ``InternalIP`` of ``status.addresses`` and
``status.daemonEndpoints.kubeletEndpoint.Port``), sends it the request over TLS with its own
credential, and once the kubelet has switched protocols copies bytes both ways unchanged: the
WebSocket (or SPDY) session is between the client and the kubelet. A kubelet's refusal is
handed to the client as it came. Nothing here knows the kubelet's code, only its paths.

Whoever may write a Node's status chooses where that is, so the address is trusted for
nothing: the credential is a client certificate (``pki.kubelet_client_context``), which a
listener only sees once it has shown a serving certificate the cluster CA signed for that
address and for that node (``system:node:NAME``); no bearer token is ever sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any
from urllib.parse import quote

from aiohttp import web

from trainctl.cluster import http_relay
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.auth import pki
from trainctl.cluster.apiserver.serving.pod_logs import choose_container

Obj = dict[str, Any]
CONNECT_TIMEOUT = 10.0
HEAD_LIMIT = 64 * 1024
READ_SIZE = 256 * 1024
SUBRESOURCES = ("exec", "attach", "portforward")
# What the client says about the upgrade is passed on; nothing else of its request is.
_FORWARDED = ("upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol",
              "sec-websocket-extensions", "x-stream-protocol-version")
_HOP_BY_HOP = ("content-length", "transfer-encoding", "keep-alive", "date", "server")


def _container(pod: Obj, subresource: str, requested: str) -> str:
    name = pod["metadata"]["name"]
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        verb = {"exec": "exec into", "attach": "attach to", "portforward": "forward ports to"}[subresource]
        raise errors.bad_request(f"cannot {verb} a container in a completed pod; current phase is {phase}")
    if not (pod.get("spec") or {}).get("nodeName"):
        raise errors.bad_request(f"pod {name} does not have a host assigned")
    if subresource == "portforward":
        return ""
    return choose_container(pod, requested)


def kubelet_endpoint(node: Obj | None, node_name: str) -> tuple[str, int]:
    status = (node or {}).get("status") or {}
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or [] if isinstance(a, dict)}
    host = addresses.get("InternalIP") or addresses.get("ExternalIP")
    if node is None or not isinstance(port, int) or not 0 < port < 65536 or not host:
        raise errors.ApiError(503, "ServiceUnavailable",
                              f"no kubelet endpoint for node {node_name!r}: the node publishes no address and port",
                              {"name": node_name, "kind": "nodes"})
    return host, port


class _Upstream:
    """Bytes from the client, after the switch, handed to the kubelet as they arrive."""

    def __init__(self, writer: asyncio.StreamWriter, client: Any) -> None:
        self._writer = writer
        self._client = client

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if not self._writer.is_closing():
            self._writer.write(data)
            if self._writer.transport.get_write_buffer_size() > 4 * READ_SIZE:
                self._client.pause_reading()
                asyncio.ensure_future(self._resume())
        return False, b""

    async def _resume(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()
        self._client.resume_reading()

    def feed_eof(self) -> None:
        if not self._writer.is_closing() and self._writer.can_write_eof():
            with contextlib.suppress(OSError):
                self._writer.write_eof()


async def dial(host: str, port: int, node_name: str,
                context: ssl.SSLContext) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TLS connection to the kubelet of ``node_name``, once it proved to be that kubelet."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            host, port, limit=HEAD_LIMIT, ssl=context, server_hostname=host), CONNECT_TIMEOUT)
    except (OSError, asyncio.TimeoutError) as exc:  # ssl.SSLError is an OSError
        raise errors.ApiError(502, "InternalError", f"error dialing backend: cannot reach the kubelet of node "
                              f"{node_name!r} at {host}:{port}: {exc}", {}) from None
    presented = pki.common_name(writer.get_extra_info("peercert"))
    if presented != f"{pki.NODE_PREFIX}{node_name}":
        writer.close()
        raise errors.ApiError(502, "InternalError", f"error dialing backend: the kubelet at {host}:{port} is "
                              f"{presented!r}, not the kubelet of node {node_name!r}", {})
    return reader, writer


async def proxy(request: web.BaseRequest, pod: Obj, node: Obj | None, subresource: str,
                context: ssl.SSLContext) -> web.StreamResponse:
    """Serve one exec, attach or portforward request through the pod's kubelet."""
    container = _container(pod, subresource, request.query.get("container", ""))
    meta = pod["metadata"]
    host, port = kubelet_endpoint(node, pod["spec"]["nodeName"])
    path = f"/{subresource}/{quote(meta['namespace'], safe='')}/{quote(meta['name'], safe='')}"
    if container:
        path += f"/{quote(container, safe='')}"
    if request.rel_url.raw_query_string:
        path += f"?{request.rel_url.raw_query_string}"
    reader, writer = await dial(host, port, pod["spec"]["nodeName"], context)
    try:
        lines = [f"{request.method} {path} HTTP/1.1", f"Host: {host}:{port}"]
        lines += [f"{name}: {value}" for name, value in request.headers.items() if name.lower() in _FORWARDED]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        code, _, headers = await asyncio.wait_for(http_relay.read_head(reader), CONNECT_TIMEOUT)
        if code != 101:
            length = next((int(v) for n, v in headers if n.lower() == "content-length"), None)
            body = await asyncio.wait_for(reader.readexactly(length) if length is not None else reader.read(),
                                          CONNECT_TIMEOUT)
            content_type = next((v for n, v in headers if n.lower() == "content-type"), "text/plain")
            return web.Response(status=code, body=body, headers={"Content-Type": content_type})
    except (OSError, ValueError, http_relay.BadResponse, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
        writer.close()
        raise errors.ApiError(502, "InternalError", f"error talking to the kubelet: {exc!r}", {}) from None

    response = web.StreamResponse(status=101)
    for name, value in headers:
        if name.lower() not in _HOP_BY_HOP:
            response.headers.add(name, value)
    try:
        protocol, transport = request.protocol, request.transport
        assert transport is not None
        protocol.keep_alive(False)
        # Before the 101 goes out: what the client sends after it (SPDY frames, which the HTTP
        # parser does not know as an upgrade) is the kubelet's, never a new request.
        protocol.set_parser(_Upstream(writer, transport))  # type: ignore[arg-type]  # any feed_data/feed_eof will do
        await response.prepare(request)
        while data := await reader.read(READ_SIZE):
            if transport.is_closing():
                break
            transport.write(data)
            await protocol._drain_helper()
    except ConnectionError:
        pass
    finally:
        writer.close()
        if request.transport is not None:
            request.transport.close()
    return response
