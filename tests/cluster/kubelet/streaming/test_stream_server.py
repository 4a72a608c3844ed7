"""The kubelet's streaming server over HTTPS: whom it answers, what it takes before any
upgrade, and how an exec that cannot start is reported."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Optional

import pytest
import requests
from aiohttp import ClientSession, ClientWebSocketResponse, web
from aiohttp.test_utils import TestServer

from trainctl.cluster.apiserver.auth import pki
from trainctl.cluster.kubelet.streaming import remotecommand
from trainctl.cluster.kubelet.streaming.stream_server import PodTarget, StreamingServer, serving_context
from trainctl.cluster.network.podnet import SharedNetwork


class NoPods:
    network = SharedNetwork()

    def find_pod(self, namespace: str, name: str) -> Optional[PodTarget]:
        return None

    def running_pods(self) -> list[dict[str, Any]]:
        return []


UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13"}


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    """A cluster's PKI: the API server's kubelet client certificate and node-a's credentials."""
    pki.kubelet_client_context(tmp_path)
    pki.ensure_node(tmp_path, "node-a", "127.0.0.1")
    return tmp_path


@pytest.fixture
def streaming(directory: Path) -> Iterator[str]:
    node = directory / "nodes" / "node-a"
    tls = serving_context(str(node / "kubelet.crt"), str(node / "kubelet.key"), str(directory / "ca.crt"))
    server = StreamingServer(NoPods(), tls, "127.0.0.1")
    port = server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop()


def _exec(streaming: str, directory: Path, client: str | None, **headers: str) -> requests.Response:
    cert = (str(directory / f"{client}.crt"), str(directory / f"{client}.key")) if client else None
    return requests.get(f"https://{streaming}/exec/default/p/main?command=true", timeout=30, cert=cert,
                        verify=str(directory / "ca.crt"), headers={
                            **UPGRADE, "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(), **headers})


def test_only_the_api_servers_client_certificate_is_answered(streaming: str, directory: Path) -> None:
    assert _exec(streaming, directory, "apiserver-kubelet-client").status_code == 404  # past the gate: no such pod
    # No certificate, whatever token comes along: 401 (the admin token is nothing here).
    refused = _exec(streaming, directory, None, Authorization="Bearer the-admin-token")
    assert refused.status_code == 401, refused.text
    assert refused.json()["reason"] == "Unauthorized"
    # A certificate of the cluster's, but a node's: 403.
    node = _exec(streaming, directory, "nodes/node-a/kubelet-client")
    assert node.status_code == 403, node.text
    assert "system:node:node-a" in node.json()["message"]
    # Plain HTTP is not served at all.
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://{streaming}/exec/default/p/main?command=true", timeout=30,
                     headers={"Authorization": "Bearer the-admin-token"})


def test_a_certificate_of_another_authority_is_refused(streaming: str, tmp_path: Path) -> None:
    other = tmp_path / "other"
    pki.kubelet_client_context(other)  # the same names, another CA
    with pytest.raises(requests.ConnectionError):  # the handshake fails (TLS 1.3: the server then hangs up)
        requests.get(f"https://{streaming}/exec/default/p/main?command=true", timeout=30, verify=False,
                     cert=(str(other / "apiserver-kubelet-client.crt"), str(other / "apiserver-kubelet-client.key")))


def test_an_exec_command_of_hundreds_of_kilobytes_is_read(streaming: str, directory: Path) -> None:
    query = "&".join(["command=python", "command=-c", "command=" + "x" * 300_000])
    response = requests.get(f"https://{streaming}/exec/default/p/main?{query}", timeout=30, headers={
        **UPGRADE, "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()},
        verify=str(directory / "ca.crt"),
        cert=(str(directory / "apiserver-kubelet-client.crt"), str(directory / "apiserver-kubelet-client.key")))
    assert response.status_code == 404, response.text
    assert response.json()["message"] == "pod default/p is not running on this node"


def test_a_command_that_cannot_start_is_said_as_the_runtime_says_it(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path)}
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert remotecommand.unrunnable(["nosuch"], env, "/") == "executable file not found in $PATH"
    assert remotecommand.unrunnable(["./nosuch"], env, str(tmp_path)) == "stat ./nosuch: no such file or directory"
    assert remotecommand.unrunnable(["./script"], env, str(tmp_path)) == "permission denied"
    (tmp_path / "script").chmod(0o755)
    assert remotecommand.unrunnable(["script"], env, "/") is None
    assert remotecommand.unrunnable(["./script", "arg"], env, str(tmp_path)) is None
    status = remotecommand.exec_failure("nosuch", "executable file not found in $PATH")
    assert (status["status"], status["reason"], status["code"]) == ("Failure", "InternalError", 500)
    assert status["message"] == ('Internal error occurred: error executing command in container: failed to exec in '
                                 'container: exec: "nosuch": executable file not found in $PATH')


async def _stdin_of(send: Callable[[ClientWebSocketResponse], Awaitable[None]]) -> list[bytes]:
    """What a channel connection hands to stdin when a client sends with ``send`` and closes."""
    received: list[bytes] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        ws, channels = await remotecommand.accept(request)
        assert channels is not None

        async def on_stdin(data: bytes) -> None:
            received.append(data)
        await channels.receive(on_stdin, lambda: received.append(b"<closed>"), lambda w, h: None)
        return ws

    app = web.Application()
    app.router.add_get("/", handler)
    async with TestServer(app) as server, ClientSession() as session:
        async with session.ws_connect(server.make_url("/"), protocols=("v4.channel.k8s.io",)) as ws:
            await send(ws)
    return received


def test_stdin_may_come_in_text_frames_as_the_python_client_sends_it() -> None:
    async def send(ws: ClientWebSocketResponse) -> None:
        await ws.send_str(chr(remotecommand.STDIN) + "echo hé\n")  # kubernetes.stream's write_stdin("...")
        await ws.send_bytes(bytes([remotecommand.STDIN]) + b"binary\n")
        await ws.send_bytes(bytes([remotecommand.CLOSE, remotecommand.STDIN]))
    assert asyncio.run(_stdin_of(send)) == ["echo hé\n".encode(), b"binary\n", b"<closed>"]
