"""The limits of what one request can do to the server: request and object size, nesting
depth, selectors and resource versions it cannot satisfy. Each refusal is a ``Status`` with
the code kube-apiserver gives, and no stored object can break reads of the others."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import sqlite3
import ssl
import subprocess
import sys
import time

import pytest
import requests

from trainctl.cluster.apiserver.process import start_apiserver

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MIB = 1024 * 1024


@pytest.fixture
def call(apiserver):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {apiserver.token}"

    def request(method: str, path: str, body: bytes | str | None = None, content_type: str = "application/json",
                timeout: float = 30) -> requests.Response:
        return session.request(method, apiserver.url + path, data=body, timeout=timeout,
                               verify=str(apiserver.ca_cert), headers={"Content-Type": content_type})

    yield request
    session.close()


def configmap(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def assert_status(response: requests.Response, code: int, reason: str) -> dict:
    assert response.status_code == code, response.text
    status = response.json()
    assert (status["kind"], status["code"], status["reason"]) == ("Status", code, reason)
    return status


# --- size -------------------------------------------------------------------------------


def test_a_body_over_three_mebibytes_is_413_not_500(call):
    body = json.dumps(configmap("big", blob="x" * (3 * MIB + 10)))
    status = assert_status(call("POST", CONFIGMAPS, body), 413, "RequestEntityTooLarge")
    assert str(3 * MIB) in status["message"]
    assert call("GET", CONFIGMAPS + "/big").status_code == 404


def test_a_huge_announced_body_is_refused_before_it_is_read(apiserver):
    """A client announcing 100 MB gets its 413 while it has sent almost nothing: the server
    neither waits for nor buffers the body."""
    context = ssl.create_default_context(cafile=str(apiserver.ca_cert))
    connection = http.client.HTTPSConnection(apiserver.host, apiserver.port, context=context, timeout=20)
    try:
        connection.putrequest("POST", CONFIGMAPS)
        connection.putheader("Authorization", f"Bearer {apiserver.token}")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(100_000_000))
        connection.endheaders()
        connection.send(b'{"metadata": {"name": "huge"}, "data": {"x": "')
        response = connection.getresponse()
        assert response.status == 413
        assert json.loads(response.read())["reason"] == "RequestEntityTooLarge"
    finally:
        connection.close()


def test_a_chunked_body_is_cut_off_at_the_limit(call):
    def chunks():
        yield b'{"metadata": {"name": "streamed"}, "data": {"x": "'
        for _ in range(8):
            yield b"x" * MIB
        yield b'"}}'

    try:
        response = call("POST", CONFIGMAPS, chunks())  # type: ignore[arg-type]
    except requests.ConnectionError:
        pass  # the server may close the connection while the client still sends: also a refusal
    else:
        assert_status(response, 413, "RequestEntityTooLarge")
    assert call("GET", CONFIGMAPS + "/streamed").status_code == 404


def test_an_object_over_the_storage_limit_is_refused_with_its_size(call):
    body = json.dumps(configmap("large", blob="x" * (2 * MIB)))  # under the request limit, over etcd's
    status = assert_status(call("POST", CONFIGMAPS, body), 413, "RequestEntityTooLarge")
    assert "object is too large" in status["message"] and "the limit is 1572864" in status["message"]
    assert call("GET", CONFIGMAPS + "/large").status_code == 404
    # Growing a stored object past the limit by patches is refused the same way.
    assert call("POST", CONFIGMAPS, json.dumps(configmap("grows", a="x" * MIB))).status_code == 201
    grow = json.dumps({"data": {"b": "y" * MIB}})
    assert_status(call("PATCH", CONFIGMAPS + "/grows", grow, "application/merge-patch+json"), 413, "RequestEntityTooLarge")
    assert "b" not in call("GET", CONFIGMAPS + "/grows").json()["data"]


# --- depth ------------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [300, 5000])
def test_deeply_nested_json_is_rejected_up_front(call, levels):
    body = json.dumps({**configmap("deep"), "extra": nested(levels)}) if levels < 900 else (
        '{"metadata": {"name": "deep"}, "extra": ' + "[" * levels + "]" * levels + "}")
    response = call("POST", CONFIGMAPS, body)
    assert response.status_code in (400, 422), response.text
    assert "nested too deeply" in response.json()["message"]
    listed = call("GET", CONFIGMAPS)
    assert listed.status_code == 200 and listed.json()["items"] == []


def test_deeply_nested_yaml_is_rejected_up_front(call):
    levels = 3000
    body = "metadata: {name: deep}\nextra: " + "[" * levels + "]" * levels + "\n"
    response = call("POST", CONFIGMAPS, body, "application/yaml")
    assert response.status_code == 400, response.text
    assert "nested too deeply" in response.json()["message"]
    block = "metadata:\n  name: deep\nextra:\n" + "".join("  " * (i + 1) + "a:\n" for i in range(300)) + "  " * 301 + "b\n"
    assert call("POST", CONFIGMAPS, block, "application/yaml").status_code == 400


WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def widget_crd() -> dict:
    """A custom resource whose spec keeps any fields: the one place a client chooses the depth."""
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}]}}


def test_patches_cannot_nest_a_stored_object_too_deeply(call):
    assert call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json.dumps(widget_crd())).status_code == 201
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "target"}, "spec": {"a": "1"}}
    assert call("POST", WIDGETS, json.dumps(widget)).status_code == 201
    deep = json.dumps({"metadata": {"annotations": {"a": "b"}}, "spec": {"extra": nested(300)}})
    assert call("PATCH", WIDGETS + "/target", deep, "application/merge-patch+json").status_code in (400, 422)
    # Each step within the limit, the result beyond it: refused when it would be stored.
    half = nested(60)
    assert call("PATCH", WIDGETS + "/target", json.dumps({"spec": {"extra": half}}), "application/merge-patch+json").status_code == 200
    inner_path = "/spec/extra" + "/a" * 58
    ops = json.dumps([{"op": "add", "path": inner_path + "/more", "value": nested(60)}])
    response = call("PATCH", WIDGETS + "/target", ops, "application/json-patch+json")
    assert response.status_code == 422, response.text
    assert "nested too deeply" in response.json()["message"]
    for method, path in (("GET", WIDGETS), ("GET", WIDGETS + "/target"), ("DELETE", WIDGETS + "/target")):
        assert call(method, path).status_code == 200


def test_a_stored_object_that_cannot_be_served_does_not_break_the_others(tmp_path):
    """An object nested too deeply to serialise, already in ``state.db`` (from an older
    server, or written by hand), is skipped with a warning; the rest of its kind is served."""
    data_dir = tmp_path / "apiserver"
    server = start_apiserver(data_dir)
    try:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {server.token}"
        session.verify = str(server.ca_cert)
        session.trust_env = False  # the CA above, not one from the environment
        for name in ("good", "poison"):
            assert session.post(server.url + CONFIGMAPS, json=configmap(name, a="1"), timeout=10).status_code == 201
        server.stop()
        db = sqlite3.connect(str(data_dir / "state.db"))
        row = db.execute("SELECT data FROM objects WHERE name = 'poison'").fetchone()
        poisoned = {**json.loads(row[0]), "extra": nested(400)}
        db.execute("UPDATE objects SET data = ? WHERE name = 'poison'", (json.dumps(poisoned).encode(),))
        db.execute("INSERT INTO objects VALUES ('/configmaps', 'default', 'garbage', 1, ?)", (b"{not json",))
        db.commit()
        db.close()
        server.start()
        listed = session.get(server.url + CONFIGMAPS, timeout=10)
        assert listed.status_code == 200, listed.text
        assert [item["metadata"]["name"] for item in listed.json()["items"]] == ["good"]
        assert session.get(server.url + CONFIGMAPS + "/poison", timeout=10).status_code == 404
        assert session.delete(server.url + CONFIGMAPS + "/good", timeout=10).status_code == 200
        # The name is free again.
        assert session.post(server.url + CONFIGMAPS, json=configmap("poison", a="2"), timeout=10).status_code == 201
        log = (data_dir / "apiserver.log").read_text()
        assert "skipping /configmaps default/poison" in log and "default/garbage" in log
    finally:
        server.stop()


# --- selectors and resource versions ------------------------------------------------------


@pytest.mark.parametrize("selector", ["a=b=c", "a in (b=c)", "a!=b c", "a=(b)", "!a/b/c", "a=" + "x" * 64])
def test_malformed_label_selectors_are_400(call, selector):
    listed = call("GET", f"{CONFIGMAPS}?labelSelector={requests.utils.quote(selector)}")
    assert_status(listed, 400, "BadRequest")
    watched = call("GET", f"{CONFIGMAPS}?watch=1&timeoutSeconds=1&labelSelector={requests.utils.quote(selector)}")
    assert_status(watched, 400, "BadRequest")


def test_a_watch_from_a_future_version_waits_then_answers_too_large(call):
    current = int(call("GET", CONFIGMAPS).json()["metadata"]["resourceVersion"])
    started = time.monotonic()
    response = call("GET", f"{CONFIGMAPS}?watch=1&resourceVersion={current + 1000}")
    elapsed = time.monotonic() - started
    status = assert_status(response, 504, "Timeout")
    assert status["message"].startswith(f"Too large resource version: {current + 1000}, current: ")
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert 1.0 <= elapsed < 25  # it waited for the version before giving up


def test_a_watch_from_a_version_about_to_be_reached_sees_later_events(call):
    current = int(call("GET", CONFIGMAPS).json()["metadata"]["resourceVersion"])
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # The server answers the watch (headers included) only once the version is reached.
        watch = pool.submit(call, "GET", f"{CONFIGMAPS}?watch=1&timeoutSeconds=3&resourceVersion={current + 1}")
        time.sleep(0.3)
        for name in ("first", "second"):  # versions current+1 and current+2
            assert call("POST", CONFIGMAPS, json.dumps(configmap(name))).status_code == 201
        response = watch.result(timeout=60)
    assert response.status_code == 200, response.text
    events = [json.loads(line) for line in response.text.splitlines() if line]
    assert [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"] == ["second"]


# --- a damaged state.db -------------------------------------------------------------------


def test_a_damaged_state_db_is_one_line_and_a_failure_exit(tmp_path):
    data_dir = tmp_path / "apiserver"
    data_dir.mkdir()
    (data_dir / "state.db").write_bytes(b"this is not an SQLite database, it was damaged" * 100)
    result = subprocess.run([sys.executable, "-m", "trainctl.cluster.apiserver", "--dir", str(data_dir)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert str(data_dir / "state.db") in lines[0] and "not a database" in lines[0]


def test_an_exec_command_of_hundreds_of_kilobytes_reaches_the_route(call):
    """An exec's command travels in the query string: kube-apiserver takes a request head of
    1 MiB, so a long command is the pod's question (here: there is no such pod), not a
    plain-text 400 for the request line."""
    query = "&".join(["command=python", "command=-c", "command=" + "x" * 300_000])
    response = call("POST", f"/api/v1/namespaces/default/pods/nosuch/exec?{query}")
    status = assert_status(response, 404, "NotFound")
    assert status["message"] == 'pods "nosuch" not found'
