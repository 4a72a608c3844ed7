"""The API server and a kubelet trust each other as kube's do: the API server dials the
kubelet a Node names with a client certificate, only once the kubelet proved to be that
node's, and never with a token; the kubelet is ``system:node:NAME`` to the API server."""

from __future__ import annotations

import base64
import os
import ssl
from pathlib import Path
from typing import Any

import pytest
import requests

from trainctl.cluster.apiserver.auth import pki
from trainctl.cluster.apiserver.process import ApiServerHandle
from trainctl.cluster.kubelet import Kubelet
from trainctl.cluster.network.ranges import HOST_IP
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import CONFIGMAPS, NODES, PODS, SECRETS, SERVICE_ACCOUNTS

from tests.support.listener import RecordingListener, recording_listener
from tests.support.pods import running_sleeper

CONNECT = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13"}


def _connect(apiserver: ApiServerHandle, pod: str, subresource: str, query: str) -> requests.Response:
    """An exec or port-forward of the admin's, as kubectl starts it."""
    return requests.get(f"{apiserver.url}/api/v1/namespaces/default/pods/{pod}/{subresource}?{query}", timeout=60,
                        verify=str(apiserver.ca_cert), headers={
                            **CONNECT, "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
                            "Authorization": f"Bearer {apiserver.token}"})


def _point_node_at(api: KubeClient, node: str, port: int) -> None:
    api.patch(NODES, None, node, {"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}},
              subresource="status")


def _dial_through(api: KubeClient, apiserver: ApiServerHandle, node: str, listener: RecordingListener,
                  pod: str) -> list[requests.Response]:
    """Exec and port-forward requests while the Node names ``listener`` (the kubelet's own
    heartbeat writes its port back, so the Node is pointed again until the listener was dialled)."""
    answers: list[requests.Response] = []
    for _ in range(10):
        _point_node_at(api, node, listener.port)
        answers.append(_connect(apiserver, pod, "exec", "command=true&container=main&stdout=true"))
        answers.append(_connect(apiserver, pod, "portforward", "ports=80"))
        if listener.connections >= 2:
            break
    assert listener.connections >= 2, "the API server never dialled the endpoint the Node named"
    return answers


def _assert_nothing_delivered(listener: RecordingListener, apiserver: ApiServerHandle,
                              answers: list[requests.Response]) -> None:
    assert b"authorization" not in listener.received.lower()
    assert apiserver.token.encode() not in listener.received
    assert b"/exec/" not in listener.received and b"/portforward/" not in listener.received
    assert answers and all(answer.status_code == 502 for answer in answers), [a.text for a in answers]
    assert all(answer.json()["kind"] == "Status" for answer in answers)


def test_a_node_pointed_at_a_listener_gives_it_no_token(kubelet: Kubelet, api: KubeClient,
                                                        apiserver: ApiServerHandle, tmp_path: Path) -> None:
    running_sleeper(api, tmp_path, "target")
    with recording_listener() as listener:
        answers = _dial_through(api, apiserver, kubelet.node_name, listener, "target")
    _assert_nothing_delivered(listener, apiserver, answers)


def test_another_nodes_certificate_does_not_pass_for_this_kubelet(kubelet: Kubelet, api: KubeClient,
                                                                  apiserver: ApiServerHandle, tmp_path: Path) -> None:
    """An attacker holding a serving certificate of the cluster's, but another node's."""
    running_sleeper(api, tmp_path, "target")
    other = pki.ensure_node(apiserver.dir / "pki", "other", HOST_IP)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(other.serving_cert, other.serving_key)
    with recording_listener(tls) as listener:
        answers = _dial_through(api, apiserver, kubelet.node_name, listener, "target")
    assert listener.received == b""  # the handshake was completed, and nothing was sent after it
    _assert_nothing_delivered(listener, apiserver, answers)
    assert "not the kubelet of node" in answers[0].json()["message"]


def _forbidden(call: Any) -> ApiError:
    with pytest.raises(ApiError) as refused:
        call()
    assert refused.value.code == 403, refused.value
    return refused.value


def test_the_kubelet_is_its_node_and_no_more(kubelet: Kubelet, api: KubeClient) -> None:
    node = kubelet.client  # what the kubelet holds: its node's client certificate
    api.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "other"}})
    error = _forbidden(lambda: node.patch(NODES, None, "other", {"status": {"phase": "Running"}}, subresource="status"))
    assert f'node "{kubelet.node_name}" is not allowed to modify node "other"' in str(error)
    node.patch(NODES, None, kubelet.node_name, {"metadata": {"annotations": {"seen": "yes"}}})  # its own: allowed
    _forbidden(lambda: node.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}))

    # Secrets and ConfigMaps: those of its own pods only.
    for name in ("mine", "theirs"):
        api.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"},
                             "data": {"k": base64.b64encode(b"v").decode()}})
        api.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}})
    for name in ("mine", "theirs"):
        api.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                      "metadata": {"name": name, "namespace": "default"}})
    for name, where in (("mine", kubelet.node_name), ("theirs", "other")):
        api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                          "spec": {"nodeName": where, "restartPolicy": "Never", "serviceAccountName": name,
                                   "volumes": [{"name": "s", "secret": {"secretName": name}}],
                                   "containers": [{"name": "main", "image": "python:3.11",
                                                   "command": ["python", "-c", "import time; time.sleep(600)"],
                                                   "envFrom": [{"configMapRef": {"name": name}}]}]}})
    assert node.get(SECRETS, "default", "mine")["data"]["k"]
    assert node.get(CONFIGMAPS, "default", "mine")["data"] == {"k": "v"}
    _forbidden(lambda: node.get(SECRETS, "default", "theirs"))
    _forbidden(lambda: node.get(CONFIGMAPS, "default", "theirs"))
    _forbidden(lambda: node.list(SECRETS, "default"))

    # A token only for a pod bound to it.
    pod = api.get(PODS, "default", "theirs")
    _forbidden(lambda: node.create(SERVICE_ACCOUNTS, {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "theirs"},
        "spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "theirs",
                                    "uid": pod["metadata"]["uid"]}}}, subresource="token"))
