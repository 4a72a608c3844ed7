"""The HPA trainctl creates for an elastic PyTorchJob, acting on the embedded cluster.

Load comes from the sample's training script: its steps spin on the CPU while a file in the
pods' working directory exists (or for its first steps), and sleep otherwise. The HPA (cpu
at 80% of requests.cpu) must scale the job from 1 Worker to its maximum of 3 and, once the
file is removed, back to 1; torchrun re-rendezvouses at every size, which shows as the
WORLD_SIZE the script logs. And with kube-controller-manager's default periods, it must
neither grow elastic.yaml's job on the CPU its pods burn starting, nor undo a
`kubectl scale`. Each test has its own cluster, syncing every 3 s on metrics published every
2 s, so the HPA has every chance to act; the first shortens the periods through the
control plane's flags, since the default 5-minute windows would outlast any test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.observer import JobObserver
from tests.support.samples import load_sample, set_arg

pytestmark = pytest.mark.e2e

JOB = "pytorch-autoscale"
BUSY_FILE = "busy"
SCALE_BOUND = 600.0  # seconds: generous, a loaded two-core machine and three torchrun restarts


@pytest.fixture
def autoscaling(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, hpa_sync_period="3s", metrics_interval=2.0, controlplane_args=[
            "--horizontal-pod-autoscaler-downscale-stabilization", "20s",
            "--horizontal-pod-autoscaler-cpu-initialization-period", "10s",
            "--horizontal-pod-autoscaler-initial-readiness-delay", "5s"]) as env:
        yield env


@pytest.fixture
def default_periods(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, hpa_sync_period="3s", metrics_interval=2.0) as env:
        yield env


def _replicas(env: E2E, job: str = JOB) -> int:
    obj = env.kubectl.json("get", "pytorchjob", job)
    return int(obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])


def _hpa_events(env: E2E, hpa: str) -> list[Any]:
    events = env.kubectl.json("get", "events", "--field-selector",
                              f"involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name={hpa}")["items"]
    return [(e["reason"], e["message"]) for e in events]


@pytest.mark.timeout(900)  # its waits' bounds: three torchrun rounds on a loaded two-core machine
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
        # The HPA took it down for want of load. (Whether it stays there is not this test's: a
        # torchrun restart burns CPU in a pod past its initialization period, which counts.)
        assert ("SuccessfulRescale", "New size: 1; reason: All metrics below target") in _hpa_events(env, JOB)
        sizes = [ln.int("WORLD_SIZE") for ln in run.lines if ln.event == "start"]
        assert 3 in sizes and 1 in sizes[sizes.index(3):], sizes
    env.clean()


ELASTIC = "pytorch-elastic"
BUSY_START_STEPS = 200  # ~10 s of a core per Worker: a slow start (a cold torch import, a download)
HOLD_STEPS = 100  # steps trained after each change before checking it held: several HPA syncs


def _world_sizes(run: JobObserver) -> set[int]:
    return {ln.int("WORLD_SIZE") for ln in run.lines if ln.event == "start"}


def _holds(run: JobObserver, world_size: int, since: float) -> None:
    """Wait until the job trains at ``world_size`` and then HOLD_STEPS more steps (at any size)."""
    first = run.wait_line(f"training at world_size={world_size}",
                          lambda ln: ln.event == "step" and ln.int("world_size") == world_size, SCALE_BOUND, since=since)
    run.wait_line(f"{HOLD_STEPS} more steps", lambda ln: ln.event == "step" and ln.int("step") >= first.int("step") + HOLD_STEPS,
                  SCALE_BOUND, since=first.at)
    print(f"[e2e] world_size={world_size} held {HOLD_STEPS} steps: {time.monotonic() - since:.1f}s")


@pytest.mark.timeout(600)  # three torchrun rounds on a loaded two-core machine
def test_the_elastic_sample_keeps_its_size_through_start_up_and_kubectl_scale(default_periods: E2E) -> None:
    env = default_periods
    job = load_sample("pytorch/elastic.yaml")
    set_arg(job, "--steps", "5000")
    set_arg(job, "--busy-steps", str(BUSY_START_STEPS))
    started = time.monotonic()
    with env.run(job) as run:
        # Both Workers burn a core each from the start; none of it is load yet.
        run.wait_line("the busy start over", lambda ln: ln.event == "step" and ln.int("step") >= BUSY_START_STEPS + HOLD_STEPS,
                      SCALE_BOUND)
        print(f"\n[e2e] through the busy start at world_size=2: {time.monotonic() - started:.1f}s")
        assert _world_sizes(run) == {2} and _replicas(env, ELASTIC) == 2, _hpa_events(env, ELASTIC)

        env.kubectl("scale", "pytorchjob", ELASTIC, "--replicas=3")
        _holds(run, 3, since=time.monotonic())
        assert _replicas(env, ELASTIC) == 3, _hpa_events(env, ELASTIC)

        env.kubectl("scale", "pytorchjob", ELASTIC, "--replicas=1")
        _holds(run, 1, since=time.monotonic())
        assert _replicas(env, ELASTIC) == 1, _hpa_events(env, ELASTIC)

        assert _world_sizes(run) == {1, 2, 3}
        hpa = env.kubectl.json("get", "hpa", ELASTIC)
        assert hpa["status"]["currentReplicas"] == 1, hpa["status"]
        events = _hpa_events(env, ELASTIC)
        assert not [e for e in events if e[0] in ("SuccessfulRescale", "SelectorRequired")], events
    env.clean()
