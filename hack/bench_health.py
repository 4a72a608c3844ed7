"""What the node check costs, and how fast it finds a broken or a slow node (docs/benchmarks.md).

On one embedded cluster of four nodes (two CPUs each, the isolated pod network), the DDP
sample with four ranks (Master + 3 Workers, one pod a node), a fresh job per run:

- ``cost``: a healthy job with and without ``trainctl.io/node-check``, from ``kubectl apply``
  to the first training step (the ``ts`` of rank 0's first ``[step]`` line), beside plain
  processes started by hand on 127.0.0.1 (the same script, the same four ranks, no cluster);
  a healthy run in which any node is tainted or blamed is a false alarm;
- ``broken``: the last node's pod links at 100 % loss (``degrade --net-loss 100``: the node
  stays Ready), from the apply to the node tainted ``trainctl.io/unhealthy`` and to the job
  training again on the healthy nodes (a step of every rank from pods not on that node);
- ``slow``: the same with the node's CPU capped (``degrade --cpu``, with
  ``trainctl.io/exclude-stragglers``).

The tables show the median (min-max) and how many runs found the bad node (and only it).

Usage: ``python hack/bench_health.py [--runs 5] [--healthy-runs 5] [--cpu 20] [--join-timeout SECONDS] [--phase cost|broken|slow ...]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests.support, when run as `python hack/bench_health.py`

from tests.support.cluster import E2E, scratch_cluster  # noqa: E402
from tests.support.net import free_port  # noqa: E402
from tests.support.node_check import DDP, checked_job, heal, job_events, node_names, tainted  # noqa: E402
from tests.support.observer import JobObserver  # noqa: E402
from tests.support.samples import load_sample  # noqa: E402

WORKERS = 3  # and a Master: four ranks, one a node
RANKS = 1 + WORKERS
PHASE_TIMEOUT = 900.0
PODS = (f"{DDP}-master-0", *(f"{DDP}-worker-{i}" for i in range(WORKERS)))


def first_step_ts(run: JobObserver, pods: Optional[set[str]] = None, after_uids: frozenset[str] = frozenset()) -> Optional[float]:
    """The wall-clock time of the first step at which every rank had trained (each rank's
    first ``[step]``, the latest of them), counting only ``pods`` and instances not in
    ``after_uids``; None until every rank has one."""
    firsts: dict[int, float] = {}
    for line in run.events("step"):
        if (pods is not None and line.pod not in pods) or line.uid in after_uids:
            continue
        rank = line.int("rank")
        firsts[rank] = min(firsts.get(rank, float("inf")), float(line.fields["ts"]))
    return max(firsts.values()) if len(firsts) == RANKS else None


def plain_job(check: bool) -> dict[str, Any]:
    if check:
        return checked_job(exclude_stragglers=False, workers=WORKERS)
    job = load_sample("pytorch/ddp.yaml")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = WORKERS
    return job


def healthy_once(bench: E2E, check: bool) -> tuple[float, bool]:
    """(apply → every rank's first step, a false alarm)."""
    applied = time.time()
    with bench.run(plain_job(check)) as run:
        ts = run.wait_for("every rank training", lambda: first_step_ts(run), PHASE_TIMEOUT)
        finished = run.wait_finished(PHASE_TIMEOUT)
        alarm = bool(tainted(bench)) or bool(run.job and job_events(bench, "NodeCheckFailed", run.job))
    bench.clean()
    heal(bench)
    return ts - applied, alarm or finished != "Succeeded"


def faulty_once(bench: E2E, fault: dict[str, Any], exclude_stragglers: bool) -> Optional[tuple[float, float, bool]]:
    """(apply → the bad node tainted, apply → training on the healthy nodes, only it found),
    or None when the job trained on the bad node (it was not found)."""
    bad = node_names(bench)[-1]
    bench.cluster.fault("degrade", bad, **fault)
    applied = time.time()
    try:
        with bench.run(checked_job(exclude_stragglers, workers=WORKERS)) as run:
            def tainted_or_training() -> Optional[str]:
                if bad in tainted(bench):
                    return "tainted"
                return "missed" if first_step_ts(run) is not None else None

            if run.wait_for(f"{bad} tainted", tainted_or_training, PHASE_TIMEOUT) == "missed":
                run.wait_finished(PHASE_TIMEOUT)
                return None
            found = time.time() - applied

            def on_healthy_nodes() -> Optional[float]:
                healthy = {name for name in PODS if (run.pods.get(name) or {}).get("spec", {}).get("nodeName") not in (None, bad)}
                return first_step_ts(run, healthy) if len(healthy) == RANKS else None

            ts = run.wait_for("training on the healthy nodes", on_healthy_nodes, PHASE_TIMEOUT)
            run.wait_finished(PHASE_TIMEOUT)
            only = set(tainted(bench)) == {bad}
    finally:
        bench.clean()
        heal(bench)
    return found, ts - applied, only


def by_hand_once(workdir: Path) -> float:
    """Four ranks of the same script started by hand on 127.0.0.1: launch → every rank's first step."""
    port = free_port("127.0.0.1")
    started = time.time()
    procs = [subprocess.Popen([sys.executable, "samples/pytorch/train.py", "--steps=20"], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env={**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                                   "WORLD_SIZE": str(RANKS), "RANK": str(rank), "CHECKPOINT_DIR": str(workdir / f"ckpt-{port}")})
             for rank in range(RANKS)]
    firsts = []
    for proc in procs:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("[step]"):
                firsts.append(float(line.split("ts=")[1].split()[0]))
                break
        proc.stdout.read()
        proc.wait()
    return max(firsts) - started


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} s ({min(values):.1f}-{max(values):.1f})" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each faulty case")
    parser.add_argument("--healthy-runs", type=int, default=5, help="healthy runs with and without the check")
    parser.add_argument("--cpu", type=int, default=20, help="the slow node's CPU, in percent")
    parser.add_argument("--join-timeout", type=float, help="the controller's --node-check-join-timeout (default: its own)")
    parser.add_argument("--phase", action="append", choices=["cost", "broken", "slow"], help="default: all")
    args = parser.parse_args()
    phases = args.phase or ["cost", "broken", "slow"]
    lines = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-health-") as root, scratch_cluster(
            Path(root), nodes=RANKS, node_cpu="2", network="isolated",
            controller_args=["--node-check-join-timeout", f"{args.join_timeout:g}"] if args.join_timeout else []) as bench:
        if "cost" in phases:
            plain, checked, by_hand, alarms = [], [], [], 0
            for index in range(args.healthy_runs):
                by_hand.append(by_hand_once(Path(root)))
                seconds, alarm = healthy_once(bench, check=False)
                plain.append(seconds)
                seconds, alarm = healthy_once(bench, check=True)
                checked.append(seconds)
                alarms += alarm
                print(f"healthy run {index + 1}: by hand {by_hand[-1]:.1f} s, cluster {plain[-1]:.1f} s, "
                      f"with the check {checked[-1]:.1f} s, false alarm: {alarm}", flush=True)
            added = [c - p for c, p in zip(checked, plain, strict=True)]
            lines += ["| apply → every rank's first step | median (min-max) |", "|---|---|",
                      f"| by hand on 127.0.0.1 (no cluster) | {spread(by_hand)} |",
                      f"| cluster, no check | {spread(plain)} |",
                      f"| cluster, node check | {spread(checked)} |",
                      f"| added by the check (paired runs) | {spread(added)} |",
                      f"| false alarms | {alarms} of {len(checked)} checked runs |", ""]
        faults = {"broken": ({"net_loss": 100}, False), "slow": ({"cpu": args.cpu}, True)}
        rows = []
        for phase in (p for p in ("broken", "slow") if p in phases):
            fault, exclude = faults[phase]
            found, training, only, missed = [], [], 0, 0
            for index in range(args.runs):
                outcome = faulty_once(bench, fault, exclude)
                if outcome is None:
                    missed += 1
                    print(f"{phase} run {index + 1}: not found, the job trained on the bad node", flush=True)
                    continue
                seconds, again, alone = outcome
                found.append(seconds)
                training.append(again)
                only += alone
                print(f"{phase} run {index + 1}: tainted after {seconds:.1f} s, training on healthy nodes after "
                      f"{again:.1f} s, only the bad node: {alone}", flush=True)
            rows.append(f"| {phase} ({fault}) | {spread(found)} | {spread(training)} | {only} of {args.runs} |")
        if rows:
            lines += ["| bad node | apply → tainted | apply → training on healthy nodes | found alone |",
                      "|---|---|---|---|", *rows]
    print(f"\nload average at the start: {load:.1f}\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
