"""batch/v1 Jobs on a real API server: kubectl create job, the controller's pods, status and columns."""

from __future__ import annotations

import json
from typing import Any

from trainctl.cluster.controlplane.api_resources import JOBS
from trainctl.cluster.controlplane.job_controller import JobController
from trainctl.kube import restmapper as r
from trainctl.kube.client import KubeClient

from tests.cluster.controlplane.conftest import eventually
from tests.support.kubectl import Kubectl

Obj = dict[str, Any]


def finish(client: KubeClient, pod: Obj, exit_code: int) -> None:
    current = client.get(r.PODS, "default", pod["metadata"]["name"])
    current["status"] = {"phase": "Succeeded" if exit_code == 0 else "Failed", "containerStatuses": [
        {"name": "prep", "restartCount": 0, "state": {"terminated": {"exitCode": exit_code, "finishedAt": "2026-01-01T00:00:00Z"}}}]}
    client.replace(r.PODS, current, subresource="status")


def test_kubectl_create_job_runs_a_pod_and_completes(client: KubeClient, kube_env: dict[str, str]) -> None:
    kubectl = Kubectl(kube_env)
    kubectl("create", "job", "prep", "--image=python:3.11", "--", "python", "-c", "print(42)")
    job = client.get(JOBS, "default", "prep")
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["backoffLimit"] == 6 and job["spec"]["completions"] == 1
    controller = JobController(client, resync_period=1.0, backoff_base=0.5)
    controller.start()
    try:
        def pods() -> list[Obj]:
            return client.list(r.PODS, "default", label_selector="batch.kubernetes.io/job-name=prep")[0]
        [first] = eventually(pods, what="the Job's pod")
        assert first["metadata"]["name"].startswith("prep-")
        table = kubectl("get", "jobs").splitlines()
        assert table[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
        assert table[1].split()[:3] == ["prep", "Running", "0/1"]

        finish(client, first, 1)  # a failure is replaced after the back-off
        eventually(lambda: len(pods()) == 2, what="a second pod after the first failed")
        second = next(p for p in pods() if p["metadata"]["name"] != first["metadata"]["name"])
        finish(client, second, 0)
        eventually(lambda: any(c["type"] == "Complete" and c["status"] == "True"
                               for c in client.get(JOBS, "default", "prep").get("status", {}).get("conditions", [])),
                   what="the Job Complete")
        status = client.get(JOBS, "default", "prep")["status"]
        assert status["succeeded"] == 1 and status["failed"] == 1 and status["completionTime"]
        assert kubectl("get", "jobs").splitlines()[1].split()[:3] == ["prep", "Complete", "1/1"]
        kubectl("wait", "--for=condition=complete", "job/prep", "--timeout=30s")
        reasons = kubectl("get", "events", "--field-selector", "involvedObject.name=prep", "-o", "jsonpath={.items[*].reason}").split()
        assert "SuccessfulCreate" in reasons and "Completed" in reasons
    finally:
        controller.stop()


def test_a_job_whose_pods_restart_always_is_refused_as_kube_refuses_it(kube_env: dict[str, str]) -> None:
    kubectl = Kubectl(kube_env)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
           "spec": {"template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "busybox"}]}}}}
    refused = kubectl.run("create", "-f", "-", input=json.dumps(job), check=False)
    assert refused.returncode != 0
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"' in refused.stderr


def test_a_jobs_template_cannot_change(client: KubeClient, kube_env: dict[str, str]) -> None:
    kubectl = Kubectl(kube_env)
    kubectl("create", "job", "fixed", "--image=busybox", "--", "true")
    changed = kubectl.run("set", "image", "job/fixed", "fixed=busybox:1.36", check=False)
    assert changed.returncode != 0 and "field is immutable" in changed.stderr
