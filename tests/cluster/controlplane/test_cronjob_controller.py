"""CronJobs on a real API server: kubectl create cronjob, its Jobs on schedule, columns and refusals."""

from __future__ import annotations

from datetime import datetime, timedelta

from trainctl.cluster.controlplane.api_resources import CRONJOBS, JOBS
from trainctl.cluster.controlplane.cronjob_controller import CronJobController
from trainctl.kube.client import KubeClient

from tests.cluster.controlplane.conftest import eventually
from tests.support.kubectl import Kubectl


def test_kubectl_create_cronjob_starts_a_job_at_each_schedule_time(client: KubeClient, kube_env: dict[str, str]) -> None:
    kubectl = Kubectl(kube_env)
    kubectl("create", "cronjob", "refresh", "--image=busybox", "--schedule=*/10 * * * *", "--", "true")
    cronjob = client.get(CRONJOBS, "default", "refresh")
    assert cronjob["spec"]["concurrencyPolicy"] == "Allow" and cronjob["spec"]["successfulJobsHistoryLimit"] == 3
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    created = datetime.fromisoformat(cronjob["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    # A clock just past the first schedule time after the CronJob's creation.
    due = created.replace(second=0) + timedelta(minutes=10 - created.minute % 10, seconds=5)
    controller = CronJobController(client, resync_period=1.0, clock=lambda: due)
    controller.start()
    try:
        jobs = eventually(lambda: client.list(JOBS, "default")[0], what="the CronJob's first Job")
        expected = f"refresh-{int((due - timedelta(seconds=5)).timestamp()) // 60}"
        assert [j["metadata"]["name"] for j in jobs] == [expected]
        assert jobs[0]["spec"]["template"]["spec"]["containers"][0]["command"] == ["true"]
        eventually(lambda: client.get(CRONJOBS, "default", "refresh").get("status", {}).get("active"), what="the Job listed as active")
        row = kubectl("get", "cronjobs").splitlines()
        assert row[0].split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
        assert row[1].split()[:1] == ["refresh"] and "<none>" in row[1] and "False" in row[1]
    finally:
        controller.stop()
    assert len(client.list(JOBS, "default")[0]) == 1  # one time, one Job, however many passes


def test_a_schedule_kube_cannot_read_is_refused(kube_env: dict[str, str]) -> None:
    refused = Kubectl(kube_env).run("create", "cronjob", "bad", "--image=busybox", "--schedule=61 * * * *", "--", "true", check=False)
    assert refused.returncode != 0 and 'spec.schedule: Invalid value: "61 * * * *": unparseable schedule' in refused.stderr

