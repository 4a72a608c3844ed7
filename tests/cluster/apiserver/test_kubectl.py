"""kubectl 1.32 against the embedded API server, with default (server-side) validation."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from tests.support.jobs import msjob, pytorchjob
from tests.support.pods import write_cri_log

pytestmark = pytest.mark.usefixtures("crds")


def apply(kubectl, obj, *flags):
    return kubectl("apply", *flags, "-f", "-", input=json.dumps(obj))


def test_crds_register_kinds_with_discovery_and_short_table(kubectl):
    resources = kubectl("api-resources", "--api-group=kubeflow.org")
    assert "pytorchjobs" in resources and "PyTorchJob" in resources
    assert "msjobs" in kubectl("api-resources", "--api-group=mindspore.gitee.com")
    crd = kubectl.json("get", "crd", "pytorchjobs.kubeflow.org")
    established = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert established == {"NamesAccepted": "True", "Established": "True"}


def test_apply_get_and_yaml_of_pytorchjob_and_msjob(kubectl):
    assert "pytorchjob.kubeflow.org/pt created" in apply(kubectl, pytorchjob("pt", restart="OnFailure", namespace=None, uid=None))
    assert "msjob.mindspore.gitee.com/ms created" in apply(kubectl, msjob("ms", restart="Never", namespace=None, uid=None))
    assert "unchanged" in apply(kubectl, pytorchjob("pt", restart="OnFailure", namespace=None, uid=None))

    table = kubectl("get", "pytorchjobs").splitlines()
    assert table[0].split() == ["NAME", "STATE", "AGE"]
    assert table[1].split()[0] == "pt" and table[1].split()[-1].endswith("s")

    job = yaml.safe_load(kubectl("get", "pytorchjob", "pt", "-o", "yaml"))
    assert job["metadata"]["uid"] and job["metadata"]["generation"] == 1
    assert job["spec"]["runPolicy"] == {"suspend": False}  # the CRD schema's defaults
    assert int(job["metadata"]["resourceVersion"]) > 0
    ms = kubectl.json("get", "msjob", "ms")
    assert ms["spec"]["msReplicaSpecs"]["Worker"]["replicas"] == 2

    changed = pytorchjob("pt", workers=3, restart="OnFailure", namespace=None, uid=None)
    assert "configured" in apply(kubectl, changed)
    after = kubectl.json("get", "pytorchjob", "pt")
    assert after["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert after["metadata"]["generation"] == 2


def test_invalid_job_is_refused_with_field_paths_by_schema_and_cel(kubectl):
    bad = pytorchjob("bad", restart="OnFailure", namespace=None, uid=None)
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = -1
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    result = kubectl.run("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert result.returncode == 1
    assert 'The PyTorchJob "bad" is invalid' in result.stderr
    assert "spec.pytorchReplicaSpecs[Worker].replicas: Invalid value: -1" in result.stderr
    assert "Master replicas must be 1" in result.stderr
    assert kubectl.run("get", "pytorchjob", "bad", check=False).returncode == 1


def test_a_wrong_type_is_said_as_kube_apiserver_says_it_and_the_rules_wait(kubectl):
    """A CEL rule handed a string where its schema says integer could only fail to evaluate:
    as kube-apiserver, the rules are not run, and one line says so."""
    bad = pytorchjob("typed", workers=2, restart="OnFailure", namespace=None, uid=None)
    bad["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": "three"}
    result = kubectl.run("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert result.returncode == 1
    assert ('spec.elasticPolicy.maxReplicas: Invalid value: "string": spec.elasticPolicy.maxReplicas in body '
            'must be of type integer: "string"') in result.stderr
    assert "some validation rules were not checked because the object was invalid" in result.stderr
    assert "rule evaluation failed" not in result.stderr and "celpy" not in result.stderr


def test_watch_prints_changes_until_the_timeout(kubectl):
    apply(kubectl, pytorchjob("w", restart="OnFailure", namespace=None, uid=None))
    watcher = kubectl.popen("get", "pytorchjobs", "-w", "--request-timeout=4s", "-o", "name")
    try:
        first = watcher.stdout.readline()
        assert first.strip() == "pytorchjob.kubeflow.org/w"
        kubectl("label", "pytorchjob", "w", "step=1")
        assert watcher.stdout.readline().strip() == "pytorchjob.kubeflow.org/w"
    finally:
        watcher.kill()
        watcher.communicate()


def test_wait_for_condition_set_through_status(kubectl):
    apply(kubectl, pytorchjob("done", restart="OnFailure", namespace=None, uid=None))
    waiter = kubectl.popen("wait", "--for=condition=Succeeded", "pytorchjob/done", "--timeout=20s")
    status = {"status": {"conditions": [{"type": "Succeeded", "status": "True", "reason": "JobSucceeded",
                                         "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    kubectl("patch", "pytorchjob", "done", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    out, err = waiter.communicate(timeout=25)
    assert waiter.returncode == 0, err
    assert "condition met" in out
    assert kubectl("get", "pytorchjob", "done").splitlines()[1].split()[1] == "Succeeded"


def test_status_is_isolated_from_spec_writes(kubectl):
    job = pytorchjob("iso", restart="OnFailure", namespace=None, uid=None)
    job["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    apply(kubectl, job)
    assert "status" not in kubectl.json("get", "pytorchjob", "iso")
    kubectl("patch", "pytorchjob", "iso", "--type=merge", "-p", '{"status":{"startTime":"2026-01-01T00:00:00Z"}}')
    assert "status" not in kubectl.json("get", "pytorchjob", "iso")


def test_scale_uses_the_crd_scale_paths(kubectl):
    apply(kubectl, pytorchjob("sc", restart="OnFailure", namespace=None, uid=None))
    assert "scaled" in kubectl("scale", "pytorchjob", "sc", "--replicas=4")
    assert kubectl.json("get", "pytorchjob", "sc")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    assert "scaled" in kubectl("scale", "pytorchjob", "sc", "--current-replicas=4", "--replicas=1")
    refused = kubectl.run("scale", "pytorchjob", "sc", "--current-replicas=7", "--replicas=2", check=False)
    assert refused.returncode == 1
    assert kubectl.json("get", "pytorchjob", "sc")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1


def test_scale_outside_the_elastic_range_is_refused_by_the_crd_rules(kubectl):
    """The CRD's rules apply to a scale write, as kube-apiserver applies them: 422, job unchanged."""
    job = pytorchjob("el", master=False, workers=2, restart="OnFailure", namespace=None, uid=None)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    apply(kubectl, job)
    for replicas, detail in (("5", "must be between minReplicas (1) and maxReplicas (3), not 5"),
                             ("0", "must be at least 1")):
        refused = kubectl.run("scale", "pytorchjob", "el", f"--replicas={replicas}", check=False)
        assert refused.returncode == 1 and "scaled" not in refused.stdout
        assert f'spec.pytorchReplicaSpecs[Worker].replicas: Invalid value: "object": {detail}' in refused.stderr
    assert kubectl.json("get", "pytorchjob", "el")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert "scaled" in kubectl("scale", "pytorchjob", "el", "--replicas=3")
    plain = pytorchjob("plain", restart="OnFailure", namespace=None, uid=None)
    apply(kubectl, plain)
    assert "must be at least 1" in kubectl.run("scale", "pytorchjob", "plain", "--replicas=0", check=False).stderr


def test_patch_merge_json_and_strategic_refused_for_custom_resources(kubectl):
    apply(kubectl, pytorchjob("pa", restart="OnFailure", namespace=None, uid=None))
    kubectl("patch", "pytorchjob", "pa", "--type=merge", "-p", '{"metadata":{"labels":{"team":"a"}}}')
    kubectl("patch", "pytorchjob", "pa", "--type=json", "-p",
            '[{"op":"replace","path":"/spec/pytorchReplicaSpecs/Worker/replicas","value":5}]')
    job = kubectl.json("get", "pytorchjob", "pa")
    assert job["metadata"]["labels"] == {"team": "a"}
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 5
    strategic = kubectl.run("patch", "pytorchjob", "pa", "-p", '{"metadata":{"labels":{"team":"b"}}}', check=False)
    assert strategic.returncode == 1
    assert "application/strategic-merge-patch+json is not supported" in strategic.stderr


def test_server_side_apply_creates_then_updates(kubectl):
    job = pytorchjob("ssa", restart="OnFailure", namespace=None, uid=None)
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", "-", input=json.dumps(job))
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 6
    kubectl("apply", "--server-side", "-f", "-", input=json.dumps(job))
    assert kubectl.json("get", "pytorchjob", "ssa")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 6


def test_strategic_apply_of_a_changed_pod_merges_lists_by_key(kubectl):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "x"}},
           "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "env": [{"name": "A", "value": "1"}]},
                                   {"name": "side", "image": "busybox:1.36"}]}}
    apply(kubectl, pod)
    pod["spec"]["containers"][1]["image"] = "busybox:1.37"
    pod["metadata"]["labels"] = {"app": "y"}
    assert "configured" in apply(kubectl, pod)
    stored = kubectl.json("get", "pod", "p")
    assert [(c["name"], c["image"]) for c in stored["spec"]["containers"]] == [("main", "busybox:1.36"),
                                                                              ("side", "busybox:1.37")]
    assert stored["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    assert stored["metadata"]["labels"] == {"app": "y"}
    assert stored["spec"]["containers"][0]["terminationMessagePath"] == "/dev/termination-log"  # defaults kept
    # Anything but an image in a pod's spec is immutable, as kube's ValidatePodUpdate has it.
    pod["spec"]["containers"][0]["env"] = [{"name": "B", "value": "2"}]
    refused = kubectl.run("apply", "-f", "-", input=json.dumps(pod), check=False)
    assert refused.returncode == 1
    assert 'The Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than' in refused.stderr
    wide = kubectl("get", "pods", "-o", "wide").splitlines()
    assert wide[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert wide[1].split()[:3] == ["p", "0/2", "Pending"]


def test_logs_read_the_kubelet_files(kubectl, apiserver):
    kubectl("run", "logger", "--image=busybox:1.36", "--restart=Never")
    pod = kubectl.json("get", "pod", "logger")
    write_cri_log(apiserver.dir, pod, "logger", 0, [
        ("2026-01-01T00:00:00.000000001Z", "stdout", "epoch 1"),
        ("2026-01-01T00:00:01.5Z", "stderr", "warning: slow"),
        ("2026-01-01T00:00:02Z", "stdout", "epoch 2"),
    ])
    assert kubectl("logs", "logger") == "epoch 1\nwarning: slow\nepoch 2\n"
    assert kubectl("logs", "logger", "--tail=1") == "epoch 2\n"
    assert kubectl("logs", "logger", "--timestamps", "--tail=1") == "2026-01-01T00:00:02Z epoch 2\n"


def test_delete_plain_and_with_a_finalizer(kubectl):
    apply(kubectl, pytorchjob("gone", restart="OnFailure", namespace=None, uid=None))
    assert 'deleted' in kubectl("delete", "pytorchjob", "gone")
    assert kubectl.run("get", "pytorchjob", "gone", check=False).returncode == 1

    job = pytorchjob("held", restart="OnFailure", namespace=None, uid=None)
    job["metadata"]["finalizers"] = ["example.com/hold"]
    apply(kubectl, job)
    kubectl("delete", "pytorchjob", "held", "--wait=false")
    held = kubectl.json("get", "pytorchjob", "held")
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == ["example.com/hold"]
    deleting = kubectl.popen("delete", "pytorchjob", "held", "--timeout=20s", "-v=6")
    for line in deleting.stderr:  # -v=6 logs each request once answered: wait for kubectl's watch
        if "watch=true" in line:
            break
    kubectl("patch", "pytorchjob", "held", "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    out, err = deleting.communicate(timeout=20)
    assert deleting.returncode == 0, err
    assert kubectl.run("get", "pytorchjob", "held", check=False).returncode == 1


def test_missing_object_and_unknown_kind_errors(kubectl):
    missing = kubectl.run("get", "pytorchjob", "nope", check=False)
    assert missing.returncode == 1
    assert 'pytorchjobs.kubeflow.org "nope" not found' in missing.stderr
    unknown = kubectl.run("get", "tfjobs", check=False)
    assert unknown.returncode == 1
    assert 'the server doesn\'t have a resource type "tfjobs"' in unknown.stderr


def test_token_is_required(kube_env, apiserver):
    config = yaml.safe_load(apiserver.kubeconfig.read_text())
    config["users"][0]["user"]["token"] = "wrong"
    bad = apiserver.kubeconfig.with_name("bad-kubeconfig")
    bad.write_text(yaml.safe_dump(config))
    env = {**kube_env, "KUBECONFIG": str(bad)}
    result = subprocess.run(["kubectl", "get", "pods"], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "You must be logged in to the server (Unauthorized)" in result.stderr


def test_typed_create_commands_sent_as_protobuf(kubectl):
    kubectl("create", "namespace", "team")
    kubectl("create", "configmap", "settings", "--from-literal=lr=0.1", "-n", "team")
    kubectl("create", "secret", "generic", "creds", "--from-literal=password=hunter2", "-n", "team")
    kubectl("create", "serviceaccount", "trainer", "-n", "team")
    kubectl("create", "service", "clusterip", "web", "--tcp=80:8080", "-n", "team")
    assert kubectl.json("get", "namespace", "team")["status"] == {"phase": "Active"}
    assert kubectl.json("get", "configmap", "settings", "-n", "team")["data"] == {"lr": "0.1"}
    assert kubectl.json("get", "secret", "creds", "-n", "team")["data"] == {"password": "aHVudGVyMg=="}
    assert kubectl.json("get", "serviceaccount", "trainer", "-n", "team")["metadata"]["namespace"] == "team"
    service = kubectl.json("get", "service", "web", "-n", "team")
    assert service["spec"]["ports"] == [{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    assert service["spec"]["selector"] == {"app": "web"} and service["spec"]["sessionAffinity"] == "None"


def test_watch_in_the_default_table_format(kubectl):
    kubectl("run", "first", "--image=busybox:1.36", "--restart=Never")
    watcher = kubectl.popen("get", "pods", "-w", "--request-timeout=10s")
    try:
        assert watcher.stdout.readline().split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert watcher.stdout.readline().split()[:3] == ["first", "0/1", "Pending"]
        kubectl("run", "second", "--image=busybox:1.36", "--restart=Never")
        assert watcher.stdout.readline().split()[:3] == ["second", "0/1", "Pending"]
    finally:
        watcher.kill()
        watcher.communicate()

