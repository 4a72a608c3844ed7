#!/usr/bin/env python3
"""Benchmark of the reconcile core: fresh plans and steady-state reconciles by job size.

    .venv/bin/python hack/bench_reconcile.py [--sizes 100,1000,10000] [--repeat 7]

For each size N (replicas: 1 Master + N-1 Workers) it times
  fresh   reconcile of a new job against an empty cluster (N pods + N Services to create);
  steady  reconcile of the same job with all N pods Running and its status up to date
          (nothing to do: the plan must be empty).
It prints the median and the best of --repeat runs in milliseconds, and the best per
replica in microseconds (flat when cost is linear). Targets for N=1,000 on the reference
machine: fresh ≤ 50 ms, steady ≤ 10 ms. Numbers go to docs/benchmarks.md.

--freeze moves everything allocated before the timing (the observed objects, as a
controller's informer cache would hold them) out of the garbage collector's reach with
gc.freeze(), which is what a long-running controller should do after its caches sync:
without it, CPython's full collections rescan that heap while a large plan is built.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from datetime import datetime, timezone

from trainctl.controller.reconcile import Observed, ReconcileConfig, reconcile

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def job(replicas: int) -> dict:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "train:1", "command": ["torchrun", "train.py"]}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bench", "namespace": "default", "uid": "uid-bench"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template},
                "Worker": {"replicas": replicas - 1, "template": template},
            }
        },
    }


def steady_state(replicas: int) -> tuple[dict, Observed]:
    """The job and its children as the API server holds them once everything runs."""
    subject = job(replicas)
    plan = reconcile(subject, Observed(), NOW, ReconcileConfig(max_creates_per_pass=replicas))
    pods, services = [], []
    for i, obj in enumerate(plan.creates):
        obj = {**obj, "metadata": {**obj["metadata"], "uid": f"uid-{i}", "resourceVersion": str(i)}}
        if obj["kind"] == "Pod":
            pods.append({**obj, "status": {"phase": "Running"}})
        else:
            services.append(obj)
    observed = Observed(pods=pods, services=services)
    subject["status"] = plan.status
    subject["status"] = reconcile(subject, observed, NOW).status
    return subject, observed


def timed(fn, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() the inputs before timing")
    args = parser.parse_args()
    reconcile(job(10), Observed(), NOW)  # warm up imports and caches
    print(
        f"{'replicas':>8}  {'fresh median':>12}  {'fresh best':>10}  {'µs/replica':>10}"
        f"  {'steady median':>13}  {'steady best':>11}  {'µs/replica':>10}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        fresh_job = job(size)
        # The whole job in one plan; the controller's default spreads it over passes of 500.
        whole = ReconcileConfig(max_creates_per_pass=size)
        plan = reconcile(fresh_job, Observed(), NOW, whole)
        assert len(plan.creates) == 2 * size, len(plan.creates)
        subject, observed = steady_state(size)
        assert reconcile(subject, observed, NOW).empty, "steady state must need nothing"
        if args.freeze:
            gc.collect()
            gc.freeze()
        fresh = timed(lambda job=fresh_job, config=whole: reconcile(job, Observed(), NOW, config), args.repeat)
        steady = timed(lambda job=subject, observed=observed: reconcile(job, observed, NOW), args.repeat)
        gc.unfreeze()
        print(
            f"{size:>8}  {statistics.median(fresh):>10.1f}ms  {min(fresh):>8.1f}ms  {min(fresh) * 1000 / size:>10.1f}"
            f"  {statistics.median(steady):>11.1f}ms  {min(steady):>9.1f}ms  {min(steady) * 1000 / size:>10.1f}"
        )


if __name__ == "__main__":
    main()
