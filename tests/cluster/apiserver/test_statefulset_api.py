"""apps/v1 StatefulSets and ControllerRevisions as the real server process serves them: defaults,
the scale subresource, kubectl's columns, the refusal of claims this cluster cannot give, and
RBAC: a user with ``view`` reads a StatefulSet but cannot scale or patch it, nor forge a
ControllerRevision that ``kubectl rollout undo`` would restore."""

from __future__ import annotations

import json
from typing import Any

from trainctl.cluster.apiserver.process import ApiServerHandle

from tests.cluster.apiserver.test_access import call
from tests.support.kubectl import Kubectl

NS = "team"
APPS = f"/apis/apps/v1/namespaces/{NS}"


def statefulset(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS},
            "spec": {"serviceName": "db", "replicas": 2, "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}},
                                  "spec": {"containers": [{"name": "db", "image": "db:1", "command": ["sleep", "60"]}]}},
                     **spec}}


def revision() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "db-forged", "namespace": NS, "labels": {"app": "db"}},
            "data": {"spec": {"template": {"$patch": "replace"}}}, "revision": 99}


def test_statefulsets_are_defaulted_scaled_and_printed_as_kube(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    kubectl.apply(statefulset())
    spec = kubectl.json("get", "sts", "db", "-n", NS)["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["revisionHistoryLimit"] == 10
    assert "scaled" in kubectl("scale", "sts", "db", "--replicas=4", "-n", NS)
    assert kubectl.json("get", "sts", "db", "-n", NS)["spec"]["replicas"] == 4
    assert kubectl("get", "sts", "-n", NS).split("\n")[0].split() == ["NAME", "READY", "AGE"]
    assert kubectl("get", "sts", "db", "-n", NS, "--no-headers").split()[:2] == ["db", "0/4"]
    wide = kubectl("get", "sts", "-n", NS, "-o", "wide").split("\n")
    assert wide[0].split() == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    assert wide[1].split()[-2:] == ["db", "db:1"]
    described = kubectl("describe", "sts", "db", "-n", NS)
    assert "Replicas:           4 desired | 0 total" in described and "Update Strategy:    RollingUpdate" in described
    uid = kubectl.json("get", "sts", "db", "-n", NS)["metadata"]["uid"]
    kubectl.apply({**revision(), "metadata": {**revision()["metadata"], "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": uid, "controller": True}]}})
    lines = kubectl("get", "controllerrevisions", "-n", NS).split("\n")
    assert lines[0].split() == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    assert lines[1].split()[:3] == ["db-forged", "statefulset.apps/db", "99"]


def test_claims_and_unknown_policies_are_refused_with_kubes_messages(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    claims = statefulset(volumeClaimTemplates=[{"metadata": {"name": "data"},
                                                "spec": {"accessModes": ["ReadWriteOnce"],
                                                         "resources": {"requests": {"storage": "1Gi"}}}}])
    refused = kubectl.run("apply", "-f", "-", input=json.dumps(claims), check=False)
    assert refused.returncode != 0
    assert "spec.volumeClaimTemplates: Forbidden: PersistentVolumeClaims are not served by this cluster" in refused.stderr
    policy = kubectl.run("apply", "-f", "-", input=json.dumps(statefulset(podManagementPolicy="Random")), check=False)
    assert 'spec.podManagementPolicy: Unsupported value: "Random"' in policy.stderr
    kubectl.apply(statefulset())
    changed = statefulset(serviceName="other")
    immutable = kubectl.run("apply", "-f", "-", input=json.dumps(changed), check=False)
    assert "updates to statefulset spec for fields other than" in immutable.stderr


def test_a_viewer_cannot_scale_patch_or_forge_revisions(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    kubectl("create", "serviceaccount", "viewer", "-n", NS)
    kubectl("create", "rolebinding", "viewer", "--clusterrole=view", f"--serviceaccount={NS}:viewer", "-n", NS)
    token = kubectl("create", "token", "viewer", "-n", NS).strip()
    kubectl.apply(statefulset())

    assert call(apiserver, f"{APPS}/statefulsets/db", token)[0] == 200
    assert call(apiserver, f"{APPS}/statefulsets/db/scale", token)[0] == 200
    assert call(apiserver, f"{APPS}/controllerrevisions", token)[0] == 200
    merge = {"Content-Type": "application/merge-patch+json"}
    code, status = call(apiserver, f"{APPS}/statefulsets/db/scale", token, "PATCH", {"spec": {"replicas": 9}}, merge)
    assert (code, status["reason"]) == (403, "Forbidden")
    assert 'cannot patch resource "statefulsets/scale" in API group "apps"' in status["message"]
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "db", "namespace": NS},
             "spec": {"replicas": 9}}
    assert call(apiserver, f"{APPS}/statefulsets/db/scale", token, "PUT", scale)[0] == 403
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "evil:1"}]}}}}
    assert call(apiserver, f"{APPS}/statefulsets/db", token, "PATCH", patch, merge)[0] == 403
    assert call(apiserver, f"{APPS}/controllerrevisions", token, "POST", revision())[0] == 403
    current = kubectl.json("get", "sts", "db", "-n", NS)
    assert current["spec"]["replicas"] == 2 and current["spec"]["template"]["spec"]["containers"][0]["image"] == "db:1"
    assert kubectl.run("get", "controllerrevisions", "db-forged", "-n", NS, check=False).returncode != 0
