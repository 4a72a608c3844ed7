"""The elastic sample under faults and scaling: torchrun agents in pods, a store that outlives them.

Every membership change restarts all workers with the new WORLD_SIZE (torchrun's rule), and
the training script resumes from the shared checkpoint. Time bounds are generous for a
loaded two-core machine but far below the stalls plain torchrun shows here (a 60 s store
timeout, ~150 s with the shared store, or never with the store-hosting pod gone; see the
elastic-fault-tolerance spec §0 and §1.7).
"""

from __future__ import annotations

import subprocess
import time

import pytest
import yaml

from tests.support.cluster import E2E
from tests.support.conditions import condition
from tests.support.metrics import restarted_total
from tests.support.observer import JobObserver, LogLine
from tests.support.pods import container_status, sigkill
from tests.support.samples import load_sample, set_arg, set_restart_policy

pytestmark = pytest.mark.e2e

JOB = "pytorch-elastic"
W0, W1, W2 = f"{JOB}-worker-0", f"{JOB}-worker-1", f"{JOB}-worker-2"
STEPS = "400"  # the sample trains minutes, for people to look at; these tests need far less
RECOVERY_BOUND = 90.0  # seconds: survivors train again after a peer is lost (speed: hack/bench_recovery.py)
REJOIN_BOUND = 120.0  # seconds: the lost peer is back and everyone trains with the full WORLD_SIZE


def step(pod: str, world_size: int, min_step: int = 0):
    def match(line: LogLine) -> bool:
        return (line.pod == pod and line.event == "step" and line.int("world_size") == world_size
                and line.int("step") >= min_step)
    return match


def training_together(run: JobObserver, pods: list[str], world_size: int, since: float, timeout: float) -> None:
    for pod in pods:
        run.wait_line(f"step of {pod} with world_size={world_size}", step(pod, world_size), timeout, since=since)


def test_worker_process_killed_is_restarted_by_the_kubelet_and_rejoins(e2e: E2E) -> None:
    job = load_sample("pytorch/elastic.yaml")  # restartPolicy OnFailure: the kubelet restarts it in place
    set_arg(job, "--steps", STEPS)
    with e2e.run(job) as run:
        run.wait_line("step 25 at world_size=2", step(W1, 2, min_step=25), timeout=120)
        survivor_uid = run.pods[W0]["metadata"]["uid"]
        killed = time.monotonic()
        sigkill(run.pods[W1])

        # torchrun restarts the survivor's workers (restart=1) instead of leaving them hanging
        run.wait_line("the survivor training again", lambda ln: ln.pod == W0 and ln.event == "step" and ln.int("restart") >= 1,
                      RECOVERY_BOUND, since=killed)
        rejoined = run.wait_line("the restarted worker training at world_size=2",
                                 lambda ln: step(W1, 2)(ln) and ln.container_restart == 1, REJOIN_BOUND, since=killed)
        print(f"\n[e2e] worker pod killed -> both train at world_size=2 again: {rejoined.at - killed:.1f}s")
        resumed = run.wait_line("[resume] of the restarted worker",
                                lambda ln: ln.pod == W1 and ln.event == "resume" and ln.container_restart == 1, 5)
        assert resumed.int("step") >= 20 and rejoined.int("step") > 20, (
            f"resumed from the checkpoint, not from scratch\n{run.dump()}"
        )
        run.wait_line("its [start] line with WORLD_SIZE=2", lambda ln: (
            ln.pod == W1 and ln.event == "start" and ln.int("WORLD_SIZE") == 2 and ln.container_restart == 1), 5)

        finished = run.wait_succeeded(timeout=240)
        assert container_status(run.pods[W1])["restartCount"] == 1, run.dump()
        assert container_status(run.pods[W0])["restartCount"] == 0, run.dump()
        assert run.uids(W0) == [survivor_uid] and len(run.uids(W1)) == 1, "no pod was recreated"
        assert condition(finished, "Succeeded")
        done = run.events("done")
        assert {ln.pod for ln in done} == {W0, W1} and {ln.int("world_size") for ln in done} == {2}, run.dump()


def test_losing_the_pod_that_plain_torchrun_would_host_the_store_in_never_stalls(e2e: E2E) -> None:
    job = load_sample("pytorch/elastic.yaml")
    set_arg(job, "--steps", STEPS)
    set_restart_policy(job, "ExitCode")  # 137 is retryable: the controller deletes and recreates the pod
    restarted_before = restarted_total(e2e.metrics_port)
    with e2e.run(job) as run:
        run.wait_line("step 25 at world_size=2", step(W0, 2, min_step=25), timeout=120)
        store_uids = run.uids(f"{JOB}-rdzv")
        assert len(store_uids) == 1, run.dump()
        lost_uid = run.pods[W0]["metadata"]["uid"]
        killed = time.monotonic()
        sigkill(run.pods[W0])

        survived = run.wait_line("the survivor training again",
                                 lambda ln: ln.pod == W1 and ln.event == "step" and ln.int("restart") >= 1,
                                 RECOVERY_BOUND, since=killed)
        replacement = run.wait_for("a replacement worker-0", lambda: [u for u in run.uids(W0) if u != lost_uid], 30)
        together = run.wait_line("the replacement training with the survivor at world_size=2",
                                 lambda ln: step(W0, 2)(ln) and ln.uid == replacement[0], REJOIN_BOUND, since=killed)
        recovered = together.at - killed
        print(f"\n[e2e] worker-0 pod killed -> survivor trains again {survived.at - killed:.1f}s, "
              f"recreated pod trains with it {recovered:.1f}s")

        finished = run.wait_succeeded(timeout=240)
        assert len(replacement) == 1 and run.uids(f"{JOB}-rdzv") == store_uids, run.dump()
        assert (finished["status"].get("restartCount") or 0) >= 1, run.dump()
        assert recovered < REJOIN_BOUND
    assert restarted_total(e2e.metrics_port) >= restarted_before + 1


def test_kubectl_scale_adds_a_third_worker_and_scaling_down_removes_the_highest_index(e2e: E2E) -> None:
    job = load_sample("pytorch/elastic.yaml")
    set_arg(job, "--steps", STEPS)
    with e2e.run(job) as run:
        run.wait_line("step 10 at world_size=2", step(W1, 2, min_step=10), timeout=120)
        e2e.kubectl("scale", "pytorchjob", JOB, "--replicas=3")
        scaled_up = time.monotonic()
        training_together(run, [W0, W1, W2], 3, since=scaled_up, timeout=REJOIN_BOUND)
        run.wait_line("[start] with WORLD_SIZE=3 on the new worker",
                      lambda ln: ln.pod == W2 and ln.event == "start" and ln.int("WORLD_SIZE") == 3, 5)

        e2e.kubectl("scale", "pytorchjob", JOB, "--replicas=2")
        scaled_down = time.monotonic()
        run.wait_for("worker-2 gone", lambda: W2 not in run.pods, 180)  # its grace period, on a loaded machine
        training_together(run, [W0, W1], 2, since=scaled_down, timeout=REJOIN_BOUND)

        run.wait_succeeded(timeout=240)
        assert W2 in run.deleted and W2 not in run.pods, run.dump()
        assert len(run.uids(W0)) == 1 and len(run.uids(W1)) == 1, "scaling never recreates the remaining workers"
        done = run.events("done")
        assert {ln.pod for ln in done} == {W0, W1} and {ln.int("world_size") for ln in done} == {2}, run.dump()


def _refused(result: subprocess.CompletedProcess[str], detail: str) -> None:
    """kubectl was answered 422 (its -v=6 request log shows the code) with ``detail`` named."""
    assert result.returncode == 1, result.stdout
    assert "422 Unprocessable Entity" in result.stderr, result.stderr
    assert detail in result.stderr, result.stderr


def test_a_scale_outside_the_elastic_range_is_refused_and_the_job_runs_on(e2e: E2E) -> None:
    """The CRD's rules apply to scale writes as on a real cluster: kubectl scale to 5 or 0 (and
    an HPA that would flip the job between crossed bounds) gets a 422 naming the field, and the
    job never hears of it: same pods, no failure, success at its size."""
    job = load_sample("pytorch/elastic.yaml")
    set_arg(job, "--steps", STEPS)
    worker_replicas = "spec.pytorchReplicaSpecs[Worker].replicas"
    with e2e.run(job) as run:
        run.wait_line("step 5 at world_size=2", step(W1, 2, min_step=5), timeout=120)
        _refused(e2e.kubectl.run("scale", "pytorchjob", JOB, "--replicas=5", "-v=6", check=False),
                 f'{worker_replicas}: Invalid value: "object": must be between minReplicas (1) and maxReplicas (3), not 5')
        _refused(e2e.kubectl.run("scale", "pytorchjob", JOB, "--replicas=0", "-v=6", check=False),
                 f'{worker_replicas}: Invalid value: "object": must be at least 1')
        for low, high, detail in ((5, 2, "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"),
                                  (0, 3, "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"),
                                  (1, 0, "spec.maxReplicas: Invalid value: 0: must be greater than 0")):
            hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": f"{JOB}-by-hand"},
                   "spec": {"scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": JOB},
                            "minReplicas": low, "maxReplicas": high}}
            _refused(e2e.kubectl.run("apply", "-f", "-", "-v=6", input=yaml.safe_dump(hpa), check=False), detail)
        assert "NotFound" in e2e.kubectl.run("get", "hpa", f"{JOB}-by-hand", check=False).stderr
        assert e2e.kubectl.json("get", "pytorchjob", JOB)["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2

        run.wait_succeeded(timeout=240)
        assert condition(run.job, "Failed") is None, run.dump()
        assert [name for name, _ in run.created if "-worker-" in name] == [W0, W1], "two workers, each created once"
        done = run.events("done")
        assert {ln.pod for ln in done} == {W0, W1} and {ln.int("world_size") for ln in done} == {2}, run.dump()
