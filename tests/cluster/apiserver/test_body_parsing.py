"""No request body, whatever its size or shape, freezes the server for other clients.

The attacker is a ServiceAccount with no bindings at all: every authenticated user may post
a SelfSubjectAccessReview, so its body is parsed whatever RBAC says. A YAML "billion laughs"
of a few hundred bytes, or a megabyte of flow-style list, must get its error (or its answer)
while the server keeps answering everyone else.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Callable, Iterator

import pytest
import requests

from trainctl.cluster.apiserver.process import ApiServerHandle

from tests.support.kubectl import Kubectl

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
PATIENCE = 8.0  # seconds: far above an answer on a loaded machine, far below the stalls seen before

Call = Callable[..., requests.Response]


@pytest.fixture
def session(apiserver: ApiServerHandle) -> Iterator[Call]:
    """``call(method, path, token, body=None, content_type=...)`` over HTTPS, one connection pool per thread."""
    def call(method: str, path: str, token: str, body: str | None = None,
             content_type: str = "application/json") -> requests.Response:
        return requests.request(method, apiserver.url + path, data=body, timeout=120, verify=str(apiserver.ca_cert),
                                headers={"Authorization": f"Bearer {token}", "Content-Type": content_type})
    yield call


@pytest.fixture
def nobody(kubectl: Kubectl) -> str:
    """The token of a ServiceAccount bound to no role at all."""
    kubectl("create", "serviceaccount", "nobody")
    return kubectl("create", "token", "nobody").strip()


def alias_bomb(levels: int) -> str:
    """A SelfSubjectAccessReview whose spec carries ``levels`` levels of ten aliases each."""
    lines = ["apiVersion: authorization.k8s.io/v1", "kind: SelfSubjectAccessReview", 'a0: &a0 ["x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    lines.append(f"spec: {{resourceAttributes: {{verb: get, resource: pods, name: *a{levels}}}}}")
    return "\n".join(lines) + "\n"


def answered_meanwhile(slow: Callable[[], requests.Response], other: Callable[[], requests.Response]
                       ) -> tuple[requests.Response, float, list[float]]:
    """``slow()``'s response and how long it took, and how long each ``other()`` sent while
    it was in flight took to answer."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        started = time.monotonic()
        future = pool.submit(slow)
        waits: list[float] = []
        while not future.done():
            sent = time.monotonic()
            assert other().status_code == 200
            waits.append(time.monotonic() - sent)
        return future.result(), time.monotonic() - started, waits


def assert_bad_request(response: requests.Response, words: str) -> None:
    assert response.status_code == 400, response.text
    status = response.json()
    assert (status["kind"], status["status"], status["reason"], status["code"]) == ("Status", "Failure", "BadRequest", 400)
    assert words in status["message"]


@pytest.mark.parametrize("levels", [7, 8])
def test_an_alias_bomb_is_refused_at_once_while_others_are_served(
        session: Call, nobody: str, apiserver: ApiServerHandle, levels: int) -> None:
    bomb = alias_bomb(levels)
    assert len(bomb) < 600  # ten million (or a hundred million) nodes in a few hundred bytes
    response, took, waits = answered_meanwhile(
        lambda: session("POST", REVIEWS, nobody, bomb, "application/yaml"),
        lambda: session("GET", "/readyz", nobody))
    assert_bad_request(response, "aliases are expanded")
    assert took < PATIENCE
    assert all(wait < PATIENCE for wait in waits), waits
    assert session("GET", "/api/v1/namespaces/default/pods", apiserver.token).status_code == 200


def test_a_megabyte_of_flow_style_list_does_not_stall_other_clients(session: Call, nobody: str,
                                                                    apiserver: ApiServerHandle) -> None:
    body = ("apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\n"
            "spec: {resourceAttributes: {verb: get, resource: pods}}\nlist: [" + ",".join(["1"] * 700_000) + "]\n")
    assert len(body) > 1_400_000
    response, _, waits = answered_meanwhile(
        lambda: session("POST", REVIEWS, nobody, body, "application/yaml"),
        lambda: session("GET", "/api/v1/namespaces/default/pods", apiserver.token))
    assert_bad_request(response, "aliases are expanded")
    assert all(wait < PATIENCE for wait in waits), waits


def test_ordinary_yaml_bodies_with_anchors_are_still_served(session: Call, nobody: str,
                                                            apiserver: ApiServerHandle) -> None:
    created = session("POST", CONFIGMAPS, apiserver.token,
                      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, labels: &labels {app: web}}\n"
                      "data:\n  <<: *labels\n  size: '3'\n", "application/yaml")
    assert created.status_code == 201, created.text
    assert created.json()["data"] == {"app": "web", "size": "3"}
    assert created.json()["metadata"]["labels"] == {"app": "web"}
    review = session("POST", REVIEWS, nobody, "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\n"
                     "spec: {resourceAttributes: {verb: &verb get, resource: pods, subresource: *verb}}\n",
                     "application/yaml")
    assert review.status_code == 201, review.text
    assert review.json()["status"]["allowed"] is False
    big = session("POST", CONFIGMAPS, apiserver.token,
                  json.dumps({"metadata": {"name": "big"}, "data": {f"k{i}": "v" for i in range(20_000)}}))
    assert big.status_code == 201 and len(big.json()["data"]) == 20_000


def test_apply_patches_are_decoded_off_the_loop_too(session: Call, apiserver: ApiServerHandle) -> None:
    """A server-side apply body is YAML: a bomb in one, or a few megabytes of flow-style list
    at once, get their 400 while every other client is answered."""
    assert session("POST", CONFIGMAPS, apiserver.token, json.dumps({"metadata": {"name": "target"}})).status_code == 201
    target = f"{CONFIGMAPS}/target?fieldManager=attacker"
    flood = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: target}\nlist: [" + ",".join(["1"] * 700_000) + "]\n"
    bodies = [alias_bomb(8), flood, flood, flood]

    def apply_all() -> list[requests.Response]:
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(bodies)) as pool:
            return list(pool.map(lambda body: session("PATCH", target, apiserver.token, body,
                                                      "application/apply-patch+yaml"), bodies))

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(apply_all)
        waits: list[float] = []
        while not future.done():
            sent = time.monotonic()
            assert session("GET", "/readyz", apiserver.token).status_code == 200
            waits.append(time.monotonic() - sent)
        responses = future.result()
    for response in responses:
        assert_bad_request(response, "aliases are expanded")
    assert all(wait < PATIENCE for wait in waits), waits
