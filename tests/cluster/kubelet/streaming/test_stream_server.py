"""The kubelet's streaming server over HTTP: what it takes before any upgrade, and how an
exec that cannot start is reported."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest
import requests

from trainctl.cluster.kubelet.streaming import remotecommand
from trainctl.cluster.kubelet.streaming.stream_server import PodTarget, StreamingServer
from trainctl.cluster.network.podnet import SharedNetwork

TOKEN = "apiserver-credential"


class NoPods:
    network = SharedNetwork()

    def find_pod(self, namespace: str, name: str) -> Optional[PodTarget]:
        return None


@pytest.fixture
def streaming() -> Iterator[str]:
    server = StreamingServer(NoPods(), TOKEN, "127.0.0.1")
    port = server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_an_exec_command_of_hundreds_of_kilobytes_is_read(streaming: str) -> None:
    query = "&".join(["command=python", "command=-c", "command=" + "x" * 300_000])
    response = requests.get(f"{streaming}/exec/default/p/main?{query}", timeout=30, headers={
        "Authorization": f"Bearer {TOKEN}", "Connection": "Upgrade", "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()})
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
