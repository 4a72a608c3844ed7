"""Identity on the embedded cluster: who a request is, what RBAC lets it do, and pods that talk
to the API server as their ServiceAccount, through the ``kubernetes`` Service.

Everything goes through real clients: kubectl (``auth can-i``, ``auth whoami``, ``create
token``, impersonation with ``--as``), the ``kubernetes`` package's in-cluster loader inside a
pod, and the controller itself, run with nothing but the token of the ServiceAccount that
manifests/base/rbac grants.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainctl.cluster.kubelet.serviceaccount import may_listen_on

from tests.support.cluster import E2E, scratch_cluster
from tests.support.controller import ControllerProcess
from tests.support.kubectl import Kubectl
from tests.support.net import free_port, with_free_port
from tests.support.repo import REPO
from tests.support.samples import load_sample

pytestmark = pytest.mark.e2e

NS = "identity"

# Inside a pod network of its own (isolated mode) or a pod sandbox the pod sees its token at
# the fixed path and load_incluster_config() runs unchanged. Otherwise the token is not there, so the
# loader is pointed at the pod's directory (DIR/pods/<uid>/serviceaccount); the rest is
# load_incluster_config(): KUBERNETES_SERVICE_HOST/PORT, the token, the CA.
LIST_PODS = textwrap.dedent("""
    import json, os, sys
    from kubernetes import client, config
    from kubernetes.config import incluster_config
    if os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token"):
        config.load_incluster_config()
        base = "/var/run/secrets/kubernetes.io/serviceaccount"
        print("loaded load_incluster_config()")
    else:
        base = os.path.join(os.environ["CLUSTER_DIR"], "pods", os.environ["POD_UID"], "serviceaccount")
        incluster_config.InClusterConfigLoader(token_filename=os.path.join(base, "token"),
                                               cert_filename=os.path.join(base, "ca.crt")).load_and_set()
        print("loaded from the pod directory")
    namespace = open(os.path.join(base, "namespace")).read()
    print("server", client.Configuration.get_default_copy().host)
    try:
        pods = client.CoreV1Api().list_namespaced_pod(namespace)
    except client.ApiException as exc:
        print("refused", exc.status, json.loads(exc.body)["message"])
        sys.exit(3)
    print("listed", sorted(p.metadata.name for p in pods.items))
""")


def in_cluster_pod(name: str, account: str, cluster_dir: Path) -> dict[str, Any]:
    env = [{"name": "CLUSTER_DIR", "value": str(cluster_dir)},
           {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"serviceAccountName": account, "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "python", "command": ["python", "-c", LIST_PODS],
                                     "env": env}]}}


def server_url(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


def pod_reader(kubectl: Kubectl) -> None:
    """ServiceAccounts ``reader`` (bound to a Role that lists pods) and ``nobody``."""
    kubectl("create", "namespace", NS)
    for account in ("reader", "nobody"):
        kubectl("create", "serviceaccount", account, "-n", NS)
    kubectl("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods", "-n", NS)
    kubectl("create", "rolebinding", "reader-reads-pods", "--role=pod-reader", f"--serviceaccount={NS}:reader", "-n", NS)


@pytest.fixture
def identity_ns(e2e: E2E) -> Any:
    pod_reader(e2e.kubectl)
    yield e2e
    e2e.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=60s", timeout=90)


def test_auth_whoami_and_can_i_for_the_admin_a_token_and_impersonation(identity_ns: E2E) -> None:
    kubectl = identity_ns.kubectl
    whoami = kubectl.json("auth", "whoami")
    assert whoami["status"]["userInfo"]["username"] == "kubernetes-admin"
    assert "system:masters" in whoami["status"]["userInfo"]["groups"]
    assert kubectl("auth", "can-i", "delete", "nodes").strip() == "yes"

    reader = f"--as=system:serviceaccount:{NS}:reader"
    assert kubectl("auth", "can-i", "list", "pods", "-n", NS, reader).strip() == "yes"
    refused = kubectl.run("auth", "can-i", "list", "pods", "-n", "default", reader, check=False)
    assert (refused.returncode, refused.stdout.strip()) == (1, "no")
    assert kubectl.run("auth", "can-i", "delete", "pods", "-n", NS, reader, check=False).stdout.strip() == "no"
    listed = kubectl("auth", "can-i", "--list", "-n", NS, reader)
    assert any(line.split()[0] == "pods" and "[get list watch]" in line for line in listed.splitlines()), listed

    token = kubectl("create", "token", "nobody", "-n", NS).strip()
    nobody = kubectl.run("--token", token, "auth", "whoami", "-o", "json")
    user = json.loads(nobody.stdout)["status"]["userInfo"]
    assert user["username"] == f"system:serviceaccount:{NS}:nobody"
    assert user["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"]
    forbidden = kubectl.run("--token", token, "get", "pods", "-n", NS, check=False)
    assert forbidden.returncode != 0
    assert (f'pods is forbidden: User "system:serviceaccount:{NS}:nobody" cannot list resource "pods" in API group "" '
            f'in the namespace "{NS}"') in forbidden.stderr

    kubectl("delete", "serviceaccount", "nobody", "-n", NS)
    gone = kubectl.run("--token", token, "auth", "whoami", check=False)
    assert gone.returncode != 0 and "Unauthorized" in gone.stderr, gone.stderr


def test_a_pod_lists_pods_in_cluster_as_its_service_account_and_another_is_refused(identity_ns: E2E) -> None:
    kubectl, cluster_dir = identity_ns.kubectl, identity_ns.cluster.directory
    kubectl.apply(in_cluster_pod("may", "reader", cluster_dir))
    kubectl.apply(in_cluster_pod("may-not", "nobody", cluster_dir))
    for name, phase in (("may", "Succeeded"), ("may-not", "Failed")):
        kubectl("wait", f"pod/{name}", "-n", NS, f"--for=jsonpath={{.status.phase}}={phase}", "--timeout=120s", timeout=150)
    cluster_ip = kubectl.json("get", "service", "kubernetes", "-n", "default")["spec"]["clusterIP"]

    allowed = kubectl("logs", "may", "-n", NS)
    assert "listed ['may', 'may-not']" in allowed, allowed
    # Through the kubernetes Service: always on a pod network of its own; on the shared one
    # where the node's proxy may listen on port 443 (root), else straight to the API server.
    isolated = identity_ns.cluster.isolated
    expected = (f"https://{cluster_ip}:443" if isolated or may_listen_on(443)
                else server_url(identity_ns.cluster.kubeconfig))
    assert f"server {expected}\n" in allowed, allowed
    # The token is at the fixed path in a pod network of its own, and in a pod sandbox (which
    # mounts it there) on the shared network too.
    node = kubectl.json("get", "pod", "may", "-n", NS)["spec"]["nodeName"]
    sandboxed = kubectl.json("get", "node", node)["metadata"].get("labels", {}).get("trainctl.io/pod-sandbox") == "bwrap"
    assert ("loaded load_incluster_config()" if isolated or sandboxed else "loaded from the pod directory") in allowed, allowed
    refused = kubectl("logs", "may-not", "-n", NS)
    assert (f'refused 403 pods is forbidden: User "system:serviceaccount:{NS}:nobody" cannot list resource "pods" '
            f'in API group "" in the namespace "{NS}"') in refused, refused

    pod = kubectl.json("get", "pod", "may", "-n", NS)
    files = cluster_dir / "pods" / pod["metadata"]["uid"] / "serviceaccount"
    assert (files / "namespace").read_text() == NS
    assert (files / "ca.crt").read_bytes() == (cluster_dir / "pki" / "ca.crt").read_bytes()
    claims = json.loads(base64.urlsafe_b64decode((files / "token").read_text().split(".")[1] + "=="))
    assert claims["sub"] == f"system:serviceaccount:{NS}:reader"
    assert claims["kubernetes.io"]["pod"] == {"name": "may", "uid": pod["metadata"]["uid"]}


def test_a_pod_naming_a_missing_service_account_is_refused(identity_ns: E2E) -> None:
    result = identity_ns.kubectl.run("apply", "-f", "-", input=yaml.safe_dump(in_cluster_pod("lost", "ghost", Path("/"))),
                                     check=False)
    assert result.returncode != 0
    assert (f'pods "lost" is forbidden: error looking up service account {NS}/ghost: serviceaccount "ghost" not found'
            in result.stderr), result.stderr


def kubeconfig_with_token(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    config = yaml.safe_load(admin_kubeconfig.read_text())
    config["users"] = [{"name": "trainctl-controller", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "trainctl-controller"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_controller_runs_a_job_with_only_its_service_accounts_rights(tmp_path: Path) -> None:
    with scratch_cluster(tmp_path, controller=False, controlplane_args=["--controllers", "serviceaccount"]) as env:
        rendered = subprocess.run(["kubectl", "kustomize", str(REPO / "manifests" / "base")], capture_output=True,
                                  text=True, check=True).stdout
        rbac = [doc for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] not in ("Deployment", "Service")]
        env.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(rbac))
        token = env.kubectl("create", "token", "trainctl-controller", "-n", "trainctl-system", "--duration=2h").strip()
        kubeconfig = kubeconfig_with_token(env.cluster.kubeconfig, token, tmp_path / "controller.kubeconfig")
        as_controller = Kubectl.for_kubeconfig(kubeconfig, tmp_path / "home")

        denied = as_controller.run("get", "secrets", "-n", "trainctl-system", check=False)
        assert ('secrets is forbidden: User "system:serviceaccount:trainctl-system:trainctl-controller" cannot list '
                'resource "secrets" in API group "" in the namespace "trainctl-system"') in denied.stderr, denied.stderr
        assert as_controller.run("auth", "can-i", "create", "pods", check=False).stdout.strip() == "yes"
        assert as_controller.run("auth", "can-i", "update", "pods", check=False).stdout.strip() == "no"

        controller = ControllerProcess(kubeconfig, tmp_path, "--leader-elect", "--leader-elect-namespace",
                                       "trainctl-system", "--health-port", str(free_port()),
                                       "--metrics-port", str(free_port())).start()
        try:
            job = with_free_port(load_sample("pytorch/ddp.yaml"))
            job["metadata"]["name"] = "rbac-ddp"
            env.kubectl.apply(job)
            env.kubectl("wait", "pytorchjob/rbac-ddp", "--for=condition=Succeeded", "--timeout=240s", timeout=270)
            lease = env.kubectl.json("get", "lease", "trainctl-controller", "-n", "trainctl-system")
            assert lease["spec"]["holderIdentity"]  # leader election through the namespaced Role
        finally:
            controller.terminate()
        log = controller.log()
        assert "forbidden" not in log.lower(), log


def test_a_pipeline_step_launches_a_job_with_only_the_pipeline_runners_rights(e2e: E2E, tmp_path: Path) -> None:
    kubectl = e2e.kubectl
    kubectl("create", "namespace", "kubeflow")
    try:
        kubectl("create", "serviceaccount", "pipeline-runner", "-n", "kubeflow")
        kubectl("apply", "-k", str(REPO / "manifests" / "pipelines"))
        token = kubectl("create", "token", "pipeline-runner", "-n", "kubeflow").strip()
        kubeconfig = kubeconfig_with_token(e2e.cluster.kubeconfig, token, tmp_path / "step.kubeconfig")
        step = subprocess.run(
            [sys.executable, "-m", "trainctl.pipelines.launch", "--kind=PyTorchJob", "--name=step-rbac",
             "--namespace=kubeflow", "--image=python", "--command=" + json.dumps([sys.executable, "-c", "print('ok')"]),
             "--replicas=1", f"--port={free_port('0.0.0.0')}", "--timeout-seconds=120",
             f"--condition-path={tmp_path / 'condition'}"],
            env={**Kubectl.for_kubeconfig(kubeconfig, tmp_path).env, "PYTHONUNBUFFERED": "1"},
            capture_output=True, text=True, timeout=180, cwd=REPO)
        assert step.returncode == 0, step.stdout + step.stderr
        assert (tmp_path / "condition").read_text() == "Succeeded"
        assert "step-rbac-master-0 | ok" in step.stdout, step.stdout
        # ... and nothing more: the step's account may not read the job's pods' Secrets.
        as_step = Kubectl.for_kubeconfig(kubeconfig, tmp_path)
        assert as_step.run("auth", "can-i", "get", "secrets", "-n", "kubeflow", check=False).stdout.strip() == "no"
        assert as_step.run("auth", "can-i", "create", "pytorchjobs.kubeflow.org", "-n", "default",
                           check=False).stdout.strip() == "no"
    finally:
        kubectl("delete", "namespace", "kubeflow", "--wait=true", "--timeout=60s", timeout=90)
