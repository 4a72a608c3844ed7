"""The HPA trainctl creates for an elastic PyTorchJob, acting on the embedded cluster.

Load comes from the sample's training script: its steps spin on the CPU while a file in the
pods' working directory exists, and sleep otherwise. The HPA (cpu at 80% of requests.cpu)
must scale the job from 1 Worker to its maximum of 3 and, once the file is removed, back to
1; torchrun re-rendezvouses at every size, which shows as the WORLD_SIZE the script logs.
The cluster is its own, with short periods: the default 5-minute scale-down stabilization
would outlast any test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.samples import load_sample, set_arg

pytestmark = pytest.mark.e2e

JOB = "pytorch-autoscale"
BUSY_FILE = "busy"
SCALE_BOUND = 600.0  # seconds: generous, a loaded two-core machine and three torchrun restarts


@pytest.fixture
def autoscaling(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, hpa_sync_period="3s", metrics_interval=2.0, controlplane_args=[
            "--hpa-downscale-stabilization", "20s", "--hpa-cpu-initialization-period", "10s",
            "--hpa-initial-readiness-delay", "5s"]) as env:
        yield env


def _replicas(env: E2E) -> int:
    job = env.kubectl.json("get", "pytorchjob", JOB)
    return int(job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])


def test_hpa_scales_a_cpu_bound_elastic_job_up_to_its_maximum_and_back_down(autoscaling: E2E) -> None:
    env = autoscaling
    job = load_sample("pytorch/elastic-autoscale.yaml")
    set_arg(job, "--busy-steps", "0")
    set_arg(job, "--busy-while", BUSY_FILE)
    with env.run(job) as run:
        run.wait_line("training at world_size=1", lambda ln: ln.event == "step" and ln.int("world_size") == 1, 180)
        # Load only from here: a busy first worker can be scaled past world_size=1 before its first step.
        (env.workdir / BUSY_FILE).touch()
        busy = time.monotonic()
        top = run.wait_line("training at world_size=3 (the HPA's maximum)",
                            lambda ln: ln.event == "step" and ln.int("world_size") == 3, SCALE_BOUND, since=busy)
        print(f"\n[e2e] busy -> 3 workers training: {top.at - busy:.1f}s")
        assert _replicas(env) == 3
        hpa = env.kubectl.json("get", "hpa", JOB)
        assert hpa["status"]["desiredReplicas"] == 3 and hpa["spec"]["maxReplicas"] == 3
        assert {s["type"]: s["status"] for s in hpa["status"]["conditions"]}["ScalingActive"] == "True"

        (env.workdir / BUSY_FILE).unlink()
        idle = time.monotonic()
        bottom = run.wait_line("training at world_size=1 again",
                               lambda ln: ln.event == "step" and ln.int("world_size") == 1, SCALE_BOUND, since=idle)
        print(f"[e2e] idle -> 1 worker training: {bottom.at - idle:.1f}s")
        assert _replicas(env) == 1
        sizes = [ln.int("WORLD_SIZE") for ln in run.lines if ln.event == "start"]
        assert 3 in sizes and sizes[-1] == 1, sizes
    env.clean()
