"""The HTTP server the API server proxies ``pods/exec``, ``attach`` and ``portforward`` to.

Paths are the real kubelet's: ``/exec/NAMESPACE/POD/CONTAINER``, ``/attach/...``,
``/portforward/NAMESPACE/POD``, ``/healthz`` and ``/pods``, with the query the client sent the API server;
and one a real kubelet has not, ``/proxy/NAMESPACE/POD/SCHEME/PORT/PATH``, the API server's
``pods/proxy`` and ``services/proxy`` (kube-apiserver dials a pod itself; this one may not
reach the pod network, so the kubelet dials the pod's own address for it). It runs on an
event loop thread of its own, on the node's address and a port the system picks, which the
kubelet advertises in its Node (``status.daemonEndpoints.kubeletEndpoint.Port``). It speaks
TLS with the node's serving certificate and answers only the API server: a request whose
client certificate the cluster CA signed for ``kube-apiserver-kubelet-client``. Without a
certificate it is 401, with another one (a node's, say) 403; a bearer token counts for
nothing, so neither a pod nor a holder of the admin token reaches a pod through it.
A request that cannot be served is refused before any upgrade, with a ``metav1.Status``
the API server hands to the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
import threading
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from aiohttp import WSMsgType, web

from trainctl.cluster import http_relay
from trainctl.cluster.kubelet.runtime import ContainerProcess
from trainctl.cluster.kubelet.streaming import portforward, remotecommand, spdy, spdyupgrade
from trainctl.cluster.network.podnet import PodNetwork

log = logging.getLogger(__name__)

MAX_REQUEST_LINE_BYTES = 1024 * 1024  # an exec's command is its query: as long as the API server takes
API_SERVER_CLIENT = "kube-apiserver-kubelet-client"  # the CN of the API server's kubelet client certificate


@dataclass(frozen=True)
class PodTarget:
    """A pod running on this node, as the streaming server reaches it."""

    namespace: str
    name: str
    uid: str
    ip: str
    containers: dict[str, Optional[ContainerProcess]]  # by name; None: not running now


class StreamingHost(Protocol):
    """What the server needs from its kubelet."""

    network: PodNetwork

    def find_pod(self, namespace: str, name: str) -> Optional[PodTarget]: ...

    def running_pods(self) -> list[dict[str, Any]]:
        """The pods this node runs, as the kubelet's ``/pods`` lists them."""


class Refused(Exception):
    """A request answered with a ``metav1.Status`` instead of a stream."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def response(self) -> web.Response:
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": self.message, "reason": self.reason, "code": self.code, "details": {}}
        return web.Response(status=self.code, body=json.dumps(status), content_type="application/json")


def serving_context(cert_file: str, key_file: str, client_ca_file: str) -> ssl.SSLContext:
    """The server's TLS (``--tls-cert-file``, ``--tls-private-key-file``): client certificates
    are checked against ``client_ca_file`` (``--client-ca-file``); one missing is judged later,
    so that the answer is a 401 rather than a failed handshake."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=client_ca_file)
    context.load_cert_chain(cert_file, key_file)
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _common_name(peer: Any) -> Optional[str]:
    subject = (peer or {}).get("subject") or ()
    return next((str(value) for rdn in subject for key, value in rdn if key == "commonName"), None)


class StreamingServer:
    def __init__(self, host: StreamingHost, tls: ssl.SSLContext, address: str) -> None:
        self._host = host
        self._tls = tls
        self._address = address
        self.port = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._server: Optional[asyncio.AbstractServer] = None
        self._http: Optional[web.Server] = None

    def start(self) -> int:
        """Listen; return the port."""
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            async def listen() -> tuple[web.Server, asyncio.Server]:
                http = web.Server(self._handle, handler_cancellation=True, max_line_size=MAX_REQUEST_LINE_BYTES)
                return http, await loop.create_server(http, self._address, 0, ssl=self._tls)
            try:
                self._http, self._server = loop.run_until_complete(listen())
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # reported to start()'s caller
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._http.shutdown(1.0))
            loop.close()

        self._thread = threading.Thread(target=run, name="kubelet-streaming", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        log.info("streaming server (exec, attach, port-forward) on %s:%d", self._address, self.port)
        return self.port

    def stop(self) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        try:
            transport = request.transport
            client = _common_name(transport.get_extra_info("peercert") if transport is not None else None)
            if client is None:
                raise Refused(401, "Unauthorized", "Unauthorized")
            if client != API_SERVER_CLIENT:
                raise Refused(403, "Forbidden", f'user "{client}" is forbidden: only the API server may reach '
                                                "this kubelet's streaming server")
            return await self._route(request)
        except Refused as refused:
            return refused.response()

    async def _route(self, request: web.BaseRequest) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if request.path == "/healthz":
            return web.Response(text="ok")
        if request.path == "/pods" and request.method == "GET":
            return web.json_response({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                      "items": self._host.running_pods()})
        if parts[:1] == ["proxy"] and len(parts) >= 5:
            return await self._proxy(request, self._pod(parts[1], parts[2]), parts[3], parts[4])
        if (parts[:1] in (["exec"], ["attach"], ["portforward"]) and not spdyupgrade.requested(request)
                and not web.WebSocketResponse().can_prepare(request).ok):
            raise Refused(400, "BadRequest", f"{parts[0]} needs a WebSocket or SPDY/3.1 upgrade")
        if len(parts) == 4 and parts[0] in ("exec", "attach"):
            pod = self._pod(parts[1], parts[2])
            if parts[3] not in pod.containers:
                raise Refused(404, "NotFound", f'container "{parts[3]}" not found in pod {pod.namespace}/{pod.name}')
            container = pod.containers[parts[3]]
            if container is None:
                raise Refused(400, "BadRequest", f'container "{parts[3]}" in pod {pod.namespace}/{pod.name} is not running')
            options = remotecommand.Options.parse(request.query)
            connection: Optional[remotecommand.Connection]
            response: web.StreamResponse
            if parts[0] == "exec" and not options.command:
                raise Refused(400, "BadRequest", "you must specify at least 1 command")
            if spdyupgrade.requested(request):
                protocol = spdyupgrade.chosen(request, spdyupgrade.EXEC_PROTOCOLS)
                if protocol is None:
                    raise Refused(403, "Forbidden", "unable to upgrade: unable to negotiate protocol: client supports "
                                  f"{request.headers.getall('X-Stream-Protocol-Version', [])}, server supports "
                                  f"{list(spdyupgrade.EXEC_PROTOCOLS)}")
                response, connection = await spdyupgrade.accept_streams(request, options, protocol)
            else:
                response, connection = await remotecommand.accept(request)
            if connection is not None:
                if parts[0] == "exec":
                    await remotecommand.run_exec(connection, container, container.enter, options)
                else:
                    await remotecommand.run_attach(connection, container, options)
            return response
        if len(parts) == 3 and parts[0] == "portforward":
            return await self._port_forward(request, self._pod(parts[1], parts[2]))
        raise Refused(404, "NotFound", "the server could not find the requested resource")

    async def _proxy(self, request: web.BaseRequest, pod: PodTarget, scheme: str, port: str) -> web.StreamResponse:
        """``/proxy/NAMESPACE/POD/SCHEME/PORT/PATH``: the API server's ``pods/proxy`` and
        ``services/proxy``, sent to the pod's own address (never one the request names)."""
        if scheme not in ("http", "https") or not port.isdigit() or not 0 < int(port) < 65536:
            raise Refused(400, "BadRequest", f"invalid proxy target {scheme}://{port}")
        segments = request.rel_url.raw_path.split("/")[1:]
        path = "/" + "/".join(segments[5:])
        if request.rel_url.raw_query_string:
            path += f"?{request.rel_url.raw_query_string}"
        loop = asyncio.get_running_loop()
        try:
            sock = await loop.run_in_executor(None, self._host.network.dial, pod.ip, int(port), portforward.DIAL_TIMEOUT)
            sock.settimeout(None)
            tls = ssl._create_unverified_context() if scheme == "https" else None  # as kube's proxy: no pod has a name to verify
            reader, writer = await asyncio.open_connection(sock=sock, ssl=tls, server_hostname=pod.ip if tls else None)
        except OSError as exc:
            raise Refused(502, "ServiceUnavailable", f"error trying to reach pod {pod.namespace}/{pod.name} at "
                          f"{pod.ip}:{port}: {exc}") from None
        try:
            return await http_relay.relay(request, reader, writer, path, f"{pod.ip}:{port}")
        except (OSError, http_relay.BadResponse, asyncio.TimeoutError) as exc:
            raise Refused(502, "ServiceUnavailable", f"error proxying to pod {pod.namespace}/{pod.name}: {exc}") from None

    def _pod(self, namespace: str, name: str) -> PodTarget:
        pod = self._host.find_pod(namespace, name)
        if pod is None:
            raise Refused(404, "NotFound", f"pod {namespace}/{name} is not running on this node")
        return pod

    async def _port_forward(self, request: web.BaseRequest, pod: PodTarget) -> web.StreamResponse:
        ports = []
        for value in request.query.getall("ports", []):
            for part in value.split(","):
                if not part.strip().isdigit() or not 0 < int(part) < 65536:
                    raise Refused(400, "BadRequest", f"invalid port {part!r}: ports must be numbers in 1-65535")
                ports.append(int(part))
        network, describe = self._host.network, f"pod {pod.name}, uid {pod.uid}"

        def dial(port: int) -> socket.socket:
            sock = network.dial(pod.ip, port, portforward.DIAL_TIMEOUT)
            sock.settimeout(None)
            return sock

        if spdyupgrade.requested(request):
            if spdyupgrade.chosen(request, (portforward.PROTOCOL,)) is None:
                raise Refused(403, "Forbidden", "unable to upgrade: unable to negotiate protocol: client supports "
                              f"{request.headers.getall('X-Stream-Protocol-Version', [])}, server supports "
                              f"[{portforward.PROTOCOL}]")
            return await spdyupgrade.serve_port_forward(request, dial, describe)
        ws = web.WebSocketResponse(protocols=(portforward.TUNNEL_PROTOCOL, *portforward.CHANNEL_PROTOCOLS),
                                   max_msg_size=0, compress=False)
        await ws.prepare(request)

        if ws.ws_protocol in portforward.CHANNEL_PROTOCOLS and ports:
            await portforward.serve_channels(ws, ports, dial, describe)
            return ws
        if ws.ws_protocol != portforward.TUNNEL_PROTOCOL:
            await ws.close(message=f"offer the subprotocol {portforward.TUNNEL_PROTOCOL}, or "
                           f"{portforward.CHANNEL_PROTOCOLS[0]} with the ports in the query".encode())
            return ws
        forwarder = portforward.Forwarder(ws.send_bytes, dial, describe)
        try:
            async for message in ws:
                if message.type == WSMsgType.BINARY:
                    await forwarder.receive(message.data)
        except spdy.ProtocolError as exc:
            log.info("port-forward to %s/%s: %s", pod.namespace, pod.name, exc)
        finally:
            await forwarder.close()
            with contextlib.suppress(ConnectionError):
                await ws.close()
        return ws

