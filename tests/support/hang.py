"""A frozen rank, as the hang test and benchmark stage it: the DDP sample busy on the CPU every
step, a pod's processes stopped with SIGSTOP, and the job's Events read back."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Optional

from kubernetes import client

from .observer import JobObserver, LogLine
from .pods import descendants, main_pid
from .samples import load_sample, set_arg, set_env

JOB = "pytorch-ddp"
MASTER, WORKER = f"{JOB}-master-0", f"{JOB}-worker-0"


def ddp_job(hang_timeout: Optional[str], steps: int = 400) -> dict[str, Any]:
    """The DDP sample with one Worker, every step busy on the CPU, long enough to freeze."""
    job = load_sample("pytorch/ddp.yaml")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    set_arg(job, "--steps", str(steps))
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


def step_of(pod: str, min_step: int, not_uid: str = "") -> Callable[[LogLine], bool]:
    def match(line: LogLine) -> bool:
        return line.pod == pod and line.event == "step" and line.int("step") >= min_step and line.uid != not_uid
    return match


def job_events(api: client.ApiClient, reason: str, run: JobObserver) -> list[dict[str, Any]]:
    """The Events ``reason`` about the job ``run`` follows (not an earlier job of its name)."""
    uid = ((run.job or {}).get("metadata") or {}).get("uid")
    events = client.CoreV1Api(api).list_namespaced_event("default", field_selector=f"involvedObject.name={run.name}")
    return [e.to_dict() for e in events.items if e.reason == reason and uid and e.involved_object.uid == uid]


def poll(what: str, check: Callable[[], list[dict[str, Any]]], timeout: float, run: JobObserver) -> list[dict[str, Any]]:
    """``check()`` once it is not empty: asked every second (Events are not watched)."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} within {timeout:g}s\n{run.dump()}"
        time.sleep(1.0)
    return found
