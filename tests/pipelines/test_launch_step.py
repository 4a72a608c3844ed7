"""The components' step (``python -m trainctl.pipelines.launch``) on the embedded cluster.

What a pipeline step does, with real jobs run by the real controller: the outputs it
writes, the log it prints, its exit status and failure message, the exact timeout, and the
API verbs it uses, which must be exactly those the RBAC manifest grants.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client

from trainctl.cluster.local_cluster import LocalCluster
from trainctl.launch import Launcher, Outcome, PlainView, connect
from trainctl.pipelines.launch import main

from tests.support.net import free_port, with_free_port
from tests.support.repo import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), controller=True, workdir=REPO) as running:
        yield running


@pytest.fixture
def step(cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Runs the step's entry point as KFP would, returning (exit code, outputs)."""
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))

    def run(*args: str) -> tuple[int, str | None, dict | None]:
        condition, status = tmp_path / "out" / "condition", tmp_path / "out" / "status"
        code = main([*args, f"--condition-path={condition}", f"--status-path={status}"])
        return (
            code,
            condition.read_text() if condition.exists() else None,
            json.loads(status.read_text()) if status.exists() else None,
        )

    return run


def python(code: str) -> str:
    return json.dumps([sys.executable, "-c", code])


def single_replica_job(kind: str, name: str, rtype: str, code: str) -> dict[str, Any]:
    """A one-replica job of ``kind`` whose container runs ``python -c code`` once."""
    api_version, specs, container = {
        "PyTorchJob": ("kubeflow.org/v1", "pytorchReplicaSpecs", "pytorch"),
        "MSJob": ("mindspore.gitee.com/v1", "msReplicaSpecs", "mindspore"),
    }[kind]
    template = {"spec": {"containers": [{"name": container, "image": "python:3.11", "command": [sys.executable, "-c", code]}]}}
    return with_free_port({"apiVersion": api_version, "kind": kind, "metadata": {"name": name},
                           "spec": {specs: {rtype: {"replicas": 1, "restartPolicy": "Never", "template": template}}}})


def job_exists(cluster: LocalCluster, plural: str, group: str, name: str) -> bool:
    custom = client.CustomObjectsApi(connect(str(cluster.kubeconfig)))
    items = custom.list_namespaced_custom_object(group, "v1", "default", plural, field_selector=f"metadata.name={name}")["items"]
    return bool(items)


def test_pytorchjob_step_succeeds_writes_outputs_and_logs(step, capsys, cluster):
    code, condition, status = step(
        "--kind=PyTorchJob", "--image=python:3.11", "--name=step-ok", "--command=" + python("print('hello from the master')"),
        "--replicas=2.0", "--timeout-seconds=60", "--delete-when-done=true", f"--port={free_port('0.0.0.0')}",
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert condition == "Succeeded"
    assert [c["type"] for c in status["conditions"] if c["status"] == "True"][-1] == "Succeeded"
    assert "step-ok-master-0 | hello from the master" in out
    assert "PyTorchJob default/step-ok succeeded after" in out
    assert not job_exists(cluster, "pytorchjobs", "kubeflow.org", "step-ok")  # delete-when-done


def test_msjob_step_from_a_manifest(step, capsys, cluster):
    manifest = single_replica_job("MSJob", "step-ms", "Worker", "print('ms worker done')")
    code, condition, _ = step(
        "--kind=MSJob", f"--manifest={yaml.safe_dump(manifest, explicit_start=True)}", "--delete-when-done=False"
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert condition == "Succeeded"
    assert "step-ms-worker-0 | ms worker done" in out
    assert job_exists(cluster, "msjobs", "mindspore.gitee.com", "step-ms")


def test_failed_job_fails_the_step_with_the_jobs_message(step, capsys):
    manifest = single_replica_job("PyTorchJob", "step-fail", "Master", "import sys; sys.exit(4)")
    code, condition, status = step("--kind=PyTorchJob", f"--manifest={json.dumps(manifest)}", "--timeout-seconds=60")
    err = capsys.readouterr().err
    assert code == 1
    assert condition == "Failed"
    message = next(c["message"] for c in status["conditions"] if c["type"] == "Failed")
    assert err.strip().splitlines()[-1] == f"error: {message}"


def test_timeout_fails_the_step_exactly_on_time_and_deletes_the_job(step, capsys, cluster):
    code, condition, _ = step(
        "--kind=PyTorchJob",
        "--image=python:3.11",
        "--name=step-slow",
        f"--command={python('import time; time.sleep(300)')}",
        "--timeout-seconds=3",
    )
    out, err = capsys.readouterr()
    assert code == 1 and condition == "TimedOut"
    assert "error: PyTorchJob default/step-slow did not finish within 3s" in err
    seconds = float(out.split("PyTorchJob default/step-slow timed out after ", 1)[1].split("s", 1)[0])
    # Not before the deadline, and long before the next poll of a polling launcher (15 s).
    assert 3.0 <= seconds < 10.0
    assert not job_exists(cluster, "pytorchjobs", "kubeflow.org", "step-slow")


def test_a_cancelled_step_deletes_its_job(cluster):
    """KFP stops a cancelled run's pods with SIGTERM; the job must not be left running."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    step = subprocess.Popen(
        [sys.executable, "-m", "trainctl.pipelines.launch", "--kind=PyTorchJob", "--image=python:3.11",
         "--name=step-cancel", "--command=" + python("import time; time.sleep(300)"), "--delete-when-done=false",
         f"--port={free_port('0.0.0.0')}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )
    try:
        for line in step.stdout:
            if "step-cancel: Running" in line:
                break
        step.send_signal(signal.SIGTERM)
        out, err = step.communicate(timeout=30)
    finally:
        step.kill()
    assert step.returncode == 1
    assert "PyTorchJob default/step-cancel interrupted" in out and "deleted:   yes" in out
    assert "error: interrupted while PyTorchJob default/step-cancel was Running" in err
    assert not job_exists(cluster, "pytorchjobs", "kubeflow.org", "step-cancel")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--kind=PyTorchJob"], "error: image: required when no manifest is given"),
        (["--kind=PyTorchJob", "--image=x", "--replicas=0"], "error: replicas: must be at least 1, got 0"),
        (["--kind=MSJob", "--manifest=kind: PyTorchJob\napiVersion: kubeflow.org/v1\nmetadata: {name: a}\n"
          "spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}"],
         "error: manifest: kind is PyTorchJob, but this component launches MSJob"),
        (["--kind=PyTorchJob", "--manifest=kind: PyTorchJob\napiVersion: kubeflow.org/v1\nmetadata: {name: a}\n"
          "spec: {pytorchReplicaSpecs: {Master: {replicas: 3}}}"],
         "error: PyTorchJob/a: spec.pytorchReplicaSpecs[Master].replicas: must be 1"),
    ],
    ids=["no-image", "no-replicas", "wrong-kind", "invalid-manifest"],
)
def test_bad_input_fails_the_step_before_any_request(args, expected, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    assert main(args) == 1
    err = capsys.readouterr().err
    assert expected in err.splitlines()
    assert "Traceback" not in err


class RecordingApiClient(client.ApiClient):
    """The real client, noting each request's (verb, API group, resource) as RBAC names them."""

    def __init__(self, configuration: client.Configuration) -> None:
        super().__init__(configuration)
        self.requests: set[tuple[str, str, str]] = set()

    def call_api(
        self, resource_path: str, method: str, path_params: Any = None, query_params: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        path = resource_path
        for key, value in (path_params or {}).items():
            path = path.replace("{" + key + "}", str(value))
        self.requests.add(rbac_request(method, path, dict(query_params or [])))
        return super().call_api(resource_path, method, path_params, query_params, *args, **kwargs)


def rbac_request(method: str, path: str, query: dict[str, Any]) -> tuple[str, str, str]:
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[:1] == ["namespaces"]:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    verb = {"POST": "create", "DELETE": "delete", "PUT": "update", "PATCH": "patch"}.get(method)
    if verb is None:
        verb = "get" if named else ("watch" if str(query.get("watch")).lower() == "true" else "list")
    return verb, group, resource


def granted(role_path: Path) -> set[tuple[str, str, str]]:
    role = yaml.safe_load(role_path.read_text())
    return {
        (verb, group, resource)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_rbac_manifest_grants_exactly_what_the_components_use(cluster):
    configuration = client.Configuration()
    from kubernetes import config

    config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=configuration)
    api = RecordingApiClient(configuration)
    launcher = Launcher(api)
    python_job = single_replica_job("PyTorchJob", "rbac-pt", "Master", "print('rbac')")
    ms_job = single_replica_job("MSJob", "rbac-ms", "Worker", "import time; time.sleep(60)")
    # Every path the step can take: success with logs, and a timeout that deletes the job.
    ok = launcher.launch(python_job, "default", PlainView(io.StringIO()), timeout=60, delete_when_done=True)
    late = launcher.launch(ms_job, "default", PlainView(io.StringIO()), timeout=2, delete_when_done=True)
    assert (ok.outcome, late.outcome) == (Outcome.SUCCEEDED, Outcome.TIMED_OUT)
    assert api.requests == granted(REPO / "manifests" / "pipelines" / "role.yaml")
