"""A frozen rank (its processes SIGSTOPped, its node healthy) on the local cluster.

With ``trainctl.io/hang-timeout`` the controller finds the hang from the workers' CPU usage,
names the frozen pod in a ``JobHung`` Event, keeps every worker's Python stacks in a ConfigMap,
restarts the workers, and the job resumes from its checkpoint and Succeeds. Without the
annotation nothing of this happens: the job waits for its rank, as it always did, and
finishes once the rank is thawed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from tests.support.cluster import E2E
from tests.support.conditions import condition
from tests.support.observer import JobObserver, LogLine
from tests.support.pods import descendants, main_pid
from tests.support.samples import load_sample, set_arg, set_env

pytestmark = pytest.mark.e2e

JOB = "pytorch-ddp"
MASTER, WORKER = f"{JOB}-master-0", f"{JOB}-worker-0"
TIMEOUT = 20  # seconds: the job's hang timeout
# Detection is due within the timeout plus 30 s; the bound is far looser for a loaded machine.
DETECTED_BOUND = TIMEOUT + 120.0


def ddp_job(hang_timeout: str | None) -> dict[str, Any]:
    """The DDP sample with one Worker, every step busy on the CPU, long enough to freeze."""
    job = load_sample("pytorch/ddp.yaml")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    set_arg(job, "--steps", "400")
    set_arg(job, "--checkpoint-every", "10")
    set_env(job, "TRAIN_BUSY_STEPS", "1000000")
    if hang_timeout is not None:
        job["metadata"]["annotations"] = {"trainctl.io/hang-timeout": hang_timeout}
    return job


def signal_container(pod: dict[str, Any], signum: int) -> list[int]:
    """``signum`` to the pod's container process and everything it started (a frozen rank)."""
    pid = main_pid(pod)
    assert pid is not None, f"pod {pod['metadata']['name']} has no running container"
    victims = [pid, *descendants(pid)]
    for victim in victims:
        try:
            os.kill(victim, signum)
        except ProcessLookupError:
            pass
    return victims


def step_of(pod: str, min_step: int):
    def match(line: LogLine) -> bool:
        return line.pod == pod and line.event == "step" and line.int("step") >= min_step
    return match


def job_events(e2e: E2E, reason: str) -> list[dict[str, Any]]:
    events = client.CoreV1Api(e2e.api).list_namespaced_event("default", field_selector=f"involvedObject.name={JOB}")
    return [e.to_dict() for e in events.items if e.reason == reason]


def poll(what: str, check: Callable[[], list[dict[str, Any]]], timeout: float, run: JobObserver) -> list[dict[str, Any]]:
    """``check()`` once it is not empty: asked every second (Events are not watched here)."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} within {timeout:g}s\n{run.dump()}"
        time.sleep(1.0)
    return found


@pytest.mark.timeout(900)
def test_a_frozen_rank_is_detected_named_dumped_restarted_and_the_job_succeeds(e2e: E2E) -> None:
    with e2e.run(ddp_job(f"{TIMEOUT}s")) as run:
        run.wait_line("step 30 of the worker", step_of(WORKER, 30), timeout=240)
        env = {e["name"]: e.get("value") for e in run.pods[WORKER]["spec"]["containers"][0]["env"]}
        assert env.get("PYTHONFAULTHANDLER") == "1", env
        first_uid = run.pods[WORKER]["metadata"]["uid"]
        frozen = time.monotonic()
        signal_container(run.pods[WORKER], signal.SIGSTOP)

        (hung,) = poll("a JobHung Event", lambda: job_events(e2e, "JobHung"), DETECTED_BOUND, run)
        detected = time.monotonic() - frozen
        message = hung["message"]
        assert f"pod {WORKER}" in message and "rank 1" in message and "state T" in message, message
        assert f"kubectl describe configmap {JOB}-hang-1" in message, message

        stacks = client.CoreV1Api(e2e.api).read_namespaced_config_map(f"{JOB}-hang-1", "default").data
        assert set(stacks) == {MASTER, WORKER}, stacks.keys()
        for pod, text in stacks.items():
            assert "Fatal Python error" in text and "train.py" in text, f"{pod}:\n{text[:2000]}"
        assert "state T" in stacks[WORKER]

        run.wait_for("the worker replaced", lambda: (run.uids(WORKER)[-1] != first_uid) or None, 120)
        trains_again = run.wait_line("the new worker training", lambda ln: step_of(WORKER, 0)(ln) and ln.uid != first_uid,
                                     timeout=150, since=frozen)
        finished = run.wait_succeeded(timeout=300)
        print(f"\n[e2e] frozen -> JobHung {detected:.1f}s; frozen -> training again {trains_again.at - frozen:.1f}s")
        assert condition(finished, "Succeeded")
        assert finished["status"]["restartCount"] == 1, finished["status"]
        (record,) = finished["status"]["hangs"]
        assert record["pod"] == WORKER and record["rank"] == 1, record


@pytest.mark.timeout(900)
def test_without_the_annotation_a_frozen_rank_is_waited_for_as_before(e2e: E2E) -> None:
    with e2e.run(ddp_job(None)) as run:
        run.wait_line("step 30 of the worker", step_of(WORKER, 30), timeout=240)
        env = {e["name"] for e in run.pods[WORKER]["spec"]["containers"][0]["env"]}
        assert "PYTHONFAULTHANDLER" not in env
        uids = (run.uids(MASTER), run.uids(WORKER))
        signal_container(run.pods[WORKER], signal.SIGSTOP)
        time.sleep(TIMEOUT + 30)  # what would have been a hang, had the job asked
        signal_container(run.pods[WORKER], signal.SIGCONT)

        finished = run.wait_succeeded(timeout=300)
        assert (run.uids(MASTER), run.uids(WORKER)) == uids, "no pod was replaced"
        assert not finished["status"].get("restartCount") and "hangs" not in finished["status"]
        assert not job_events(e2e, "JobHung")
