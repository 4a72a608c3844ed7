#!/usr/bin/env python3
"""Benchmark of launch-and-wait: how soon the launcher notices the end, and how exact its timeout is.

    .venv/bin/python hack/bench_launch.py [--jobs 30] [--timeouts 20] [--timeout 0.5]

Against a fresh embedded API server (no controller: this script writes each job's
conditions through the /status subresource itself, as the controller would):
  notice   time from the status write that makes a job Succeeded to ``launch`` returning
           (the old KFP launchers polled every 15 s or 30 s: 7.5 s / 15 s on average);
  create   time from calling ``launch`` to the job being created (one POST);
  timeout  how far past its deadline a launch asked to wait --timeout seconds returns.
Prints p50, p90 and max in milliseconds. Numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import threading
import time
from datetime import datetime, timezone

from kubernetes import client

from trainctl.api.crd import crds
from trainctl.cluster.apiserver.process import start_apiserver
from trainctl.launch import Launcher, PlainView, connect
from trainctl.launch.progress import JobProgress

NAMESPACE = "default"


def job(name: str) -> dict:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["python", "-c", "pass"]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}}},
        },
    }


class Signalling(PlainView):
    """Records when the job was created and when the launcher first saw each state."""

    def __init__(self) -> None:
        super().__init__(io.StringIO())
        self.created = threading.Event()
        self.created_at = 0.0
        self.seen: dict[str, threading.Event] = {}

    def note(self, message: str) -> None:
        if message.startswith("created "):
            self.created_at = time.perf_counter()
            self.created.set()

    def show(self, progress: JobProgress) -> None:
        self.seen.setdefault(progress.state, threading.Event()).set()

    def wait_seen(self, state: str) -> None:
        self.seen.setdefault(state, threading.Event()).wait(30)


def condition(type_: str) -> dict:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": type_,
        "status": "True",
        "reason": f"PyTorchJob{type_}",
        "message": type_,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
    }


def set_status(custom: client.CustomObjectsApi, name: str, *conditions: dict) -> None:
    body = {"status": {"conditions": list(conditions), "replicaStatuses": {}}}
    custom.patch_namespaced_custom_object_status("kubeflow.org", "v1", NAMESPACE, "pytorchjobs", name, body)


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return f"p50 {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms   max {ms[-1]:7.1f} ms   (n={len(ms)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--timeouts", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=0.5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        server = start_apiserver(directory)
        try:
            api = connect(str(server.kubeconfig))
            extensions = client.ApiextensionsV1Api(api)
            for crd in crds().values():
                extensions.create_custom_resource_definition(crd)
            custom = client.CustomObjectsApi(api)
            launcher = Launcher(api)

            notice, create = [], []
            for i in range(args.jobs):
                name, view, result = f"bench-{i}", Signalling(), {}
                called = time.perf_counter()
                thread = threading.Thread(target=lambda name=name, view=view, result=result: result.update(
                    r=launcher.launch(job(name), NAMESPACE, view)))
                thread.start()
                view.created.wait(30)
                create.append(view.created_at - called)
                set_status(custom, name, condition("Running"))
                view.wait_seen("Running")  # the launcher is watching: what follows is delivered, not listed
                written = time.perf_counter()
                set_status(custom, name, condition("Succeeded"))
                thread.join(30)
                notice.append(time.perf_counter() - written)
                assert result["r"].succeeded

            overshoot = []
            for i in range(args.timeouts):
                started = time.perf_counter()
                outcome = launcher.launch(job(f"late-{i}"), NAMESPACE, Signalling(), timeout=args.timeout, delete_when_done=True)
                overshoot.append(time.perf_counter() - started - args.timeout)
                assert outcome.outcome.value == "TimedOut"
        finally:
            server.stop()

    print(f"notice   {percentiles(notice)}")
    print(f"create   {percentiles(create)}")
    print(f"timeout  {percentiles(overshoot)}  past a {args.timeout:g} s deadline (job deleted)")


if __name__ == "__main__":
    main()
