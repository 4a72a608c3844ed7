"""``pods/log`` reads the CRI-format files the kubelet writes under
``DIR/pods/<uid>/<container>/<restartCount>.log``; here the files are written by hand."""

from __future__ import annotations

import pytest
import requests
from kubernetes import client

from tests.support.pods import write_cri_log

NS = "default"


@pytest.fixture
def running_pod(api):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(NS, {"metadata": {"name": "trainer"}, "spec": {
        "nodeName": "local",
        "containers": [{"name": "pytorch", "image": "x"}, {"name": "sidecar", "image": "y"}]}})
    core.patch_namespaced_pod_status("trainer", NS, {"status": {"phase": "Running", "containerStatuses": [
        {"name": "pytorch", "restartCount": 1, "ready": True, "image": "x", "imageID": "", "state": {"running": {}}},
        {"name": "sidecar", "restartCount": 0, "ready": True, "image": "y", "imageID": "", "state": {"running": {}}}]}})
    return core.read_namespaced_pod("trainer", NS).to_dict()


@pytest.fixture
def log_url(apiserver):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {apiserver.token}"

    def get(query: str = "", **kwargs):
        return session.get(f"{apiserver.url}/api/v1/namespaces/default/pods/trainer/log{query}",
                           verify=str(apiserver.ca_cert), timeout=10, **kwargs)

    yield get
    session.close()


def test_current_previous_container_choice_and_filters(apiserver, running_pod, log_url):
    write_cri_log(apiserver.dir, running_pod, "pytorch", 0, [("2026-01-01T00:00:00Z", "stdout", "first attempt")])
    write_cri_log(apiserver.dir, running_pod, "pytorch", 1, [
        ("2026-01-01T00:01:00.123456789Z", "stdout", "step 1"),
        ("2026-01-01T00:02:00Z", "stderr", "step 2"),
        ("2026-01-01T00:03:00Z", "stdout", "step 3"),
    ])
    write_cri_log(apiserver.dir, running_pod, "sidecar", 0, [("2026-01-01T00:00:00Z", "stdout", "side")])

    assert log_url().text == "step 1\nstep 2\nstep 3\n"  # the first container by default
    assert log_url("?container=pytorch&previous=true").text == "first attempt\n"
    assert log_url("?container=sidecar").text == "side\n"
    assert log_url("?tailLines=2").text == "step 2\nstep 3\n"
    assert log_url("?timestamps=true&tailLines=1").text == "2026-01-01T00:03:00Z step 3\n"
    assert log_url("?sinceTime=2026-01-01T00:02:00Z").text == "step 2\nstep 3\n"
    assert log_url("?limitBytes=10").text == "step 1\nste"
    missing = log_url("?container=nope")
    assert missing.status_code == 400 and "container nope is not valid" in missing.json()["message"]
    no_previous = log_url("?container=sidecar&previous=true")
    assert no_previous.status_code == 400 and no_previous.json()["reason"] == "BadRequest"


def test_partial_records_are_joined(apiserver, running_pod, log_url):
    path = apiserver.dir / "pods" / running_pod["metadata"]["uid"] / "pytorch" / "1.log"
    path.parent.mkdir(parents=True)
    path.write_text("2026-01-01T00:00:00Z stdout P a long \n2026-01-01T00:00:00Z stdout F line\n")
    assert log_url().text == "a long line\n"


def test_follow_streams_until_the_container_terminates(apiserver, api, running_pod, log_url):
    path = write_cri_log(apiserver.dir, running_pod, "pytorch", 1, [("2026-01-01T00:00:00Z", "stdout", "epoch 1")])
    with log_url("?follow=true", stream=True) as response:
        lines = response.iter_lines(decode_unicode=True)
        assert next(lines) == "epoch 1"
        write_cri_log(apiserver.dir, running_pod, "pytorch", 1, [("2026-01-01T00:00:01Z", "stdout", "epoch 2")])
        assert next(lines) == "epoch 2"
        write_cri_log(apiserver.dir, running_pod, "pytorch", 1, [("2026-01-01T00:00:02Z", "stdout", "done")])
        client.CoreV1Api(api).patch_namespaced_pod_status("trainer", NS, {"status": {"containerStatuses": [
            {"name": "pytorch", "restartCount": 1, "ready": False, "image": "x", "imageID": "",
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "sidecar", "restartCount": 0, "ready": True, "image": "y", "imageID": "", "state": {"running": {}}}]}})
        assert list(lines) == ["done"]  # and the stream ends
    assert path.exists()


def test_logs_of_a_pod_that_has_not_started(api, log_url):
    client.CoreV1Api(api).create_namespaced_pod(NS, {"metadata": {"name": "trainer"},
                                                     "spec": {"containers": [{"name": "pytorch", "image": "x"}]}})
    waiting = log_url()
    assert waiting.status_code == 400
    assert 'container "pytorch" in pod "trainer" is waiting to start' in waiting.json()["message"]


def test_a_container_waiting_to_restart_shows_the_run_that_ended(apiserver, api, running_pod, log_url):
    """As the real kubelet: in CrashLoopBackOff ``restartCount`` still names the run that
    crashed, and both ``kubectl logs`` and ``--previous`` read that run's output."""
    write_cri_log(apiserver.dir, running_pod, "pytorch", 0, [("2026-01-01T00:00:00Z", "stdout", "first crash")])
    write_cri_log(apiserver.dir, running_pod, "pytorch", 1, [("2026-01-01T00:01:00Z", "stdout", "second crash")])
    crashed = {"terminated": {"exitCode": 1, "reason": "Error"}}
    client.CoreV1Api(api).patch_namespaced_pod_status("trainer", NS, {"status": {"containerStatuses": [
        {"name": "pytorch", "restartCount": 1, "ready": False, "image": "x", "imageID": "", "lastState": crashed,
         "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}}},
        {"name": "sidecar", "restartCount": 0, "ready": True, "image": "y", "imageID": "", "state": {"running": {}}}]}})
    assert log_url().text == "second crash\n"
    assert log_url("?previous=true").text == "second crash\n"
    with log_url("?follow=true", stream=True) as response:  # the run has ended: so does the stream
        assert response.text == "second crash\n"
