"""Benchmark the embedded cluster: start-up time, pod start latency and pod throughput.

    .venv/bin/python hack/bench_local.py [--pods 50] [--sequential 20] [--nodes 1] [--idle 60]

Starts a LocalCluster (no controller) in a temporary directory, then measures:
- how long ``LocalCluster.start()`` takes until the node is ready;
- create -> Running and create -> Succeeded for ``python -c pass`` pods, one at a time;
- how long a burst of pods created at once takes until all have Succeeded;
- with ``--idle S``: what the scheduler and the kubelets cost while nothing happens for S
  seconds (CPU seconds, RSS, and API writes per minute from the API server's /metrics,
  ``apiserver_request_total`` for the write verbs).
Numbers go to docs/benchmarks.md ("Embedded cluster").
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainctl.cluster.local_cluster import LocalCluster  # noqa: E402
from trainctl.kube.client import KubeClient  # noqa: E402
from trainctl.kube.restmapper import PODS  # noqa: E402


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "python", "command": ["python", "-c", "pass"]}]}}


def follow(api: KubeClient, names: set[str]) -> dict[str, dict[str, float]]:
    """Watch pods until every one in ``names`` has finished; first time seen in each phase."""
    seen: dict[str, dict[str, float]] = {name: {} for name in names}
    items, version = api.list(PODS, "default")
    pending = set(names)
    for item in items:
        if item["metadata"]["name"] in pending and item.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            seen[item["metadata"]["name"]].setdefault(item["status"]["phase"], time.perf_counter())
            pending.discard(item["metadata"]["name"])
    while pending:
        for event in api.watch(PODS, "default", version, timeout_seconds=120):
            obj = event["object"]
            version = obj.get("metadata", {}).get("resourceVersion", version)
            name = obj.get("metadata", {}).get("name")
            if name not in seen:
                continue
            phase = obj.get("status", {}).get("phase") or "Pending"
            seen[name].setdefault(phase, time.perf_counter())
            if phase in ("Succeeded", "Failed"):
                pending.discard(name)
            if not pending:
                break
    return seen


WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE", "APPLY")


def api_writes(api: KubeClient) -> dict[str, float]:
    """Write requests so far by resource, from the API server's Prometheus /metrics."""
    text = api._request("GET", "/metrics", verb="get").data.decode()
    counts: dict[str, float] = {}
    for line in str(text).splitlines():
        match = re.match(r'apiserver_request_total\{(.*)\} ([0-9.e+]+)', line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if labels.get("verb", "").upper() in WRITE_VERBS:
            key = labels.get("resource", "?")
            counts[key] = counts.get(key, 0.0) + float(match.group(2))
    return counts


def cpu_rss(pid: int) -> tuple[float, int]:
    """CPU seconds used so far and resident memory in KiB of one process."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return cpu, rss


def idle_cost(cluster: LocalCluster, seconds: float) -> list[str]:
    """CPU share, RSS and API writes per minute of the scheduler and kubelets at idle."""
    api = cluster.client()
    parts = {"scheduler": cluster.scheduler, **{f"kubelet {name}": c for name, c in cluster.kubelets.items()}}
    before = {name: cpu_rss(c.pid) for name, c in parts.items() if c.pid}
    writes_before = api_writes(api)
    time.sleep(seconds)
    writes_after = api_writes(api)
    lines = []
    for name, component in parts.items():
        cpu, rss = cpu_rss(component.pid)
        lines.append(f"  {name}: CPU {100 * (cpu - before[name][0]) / seconds:.2f} %, RSS {rss / 1024:.0f} MiB")
    per_minute = {k: (v - writes_before.get(k, 0.0)) * 60 / seconds for k, v in writes_after.items()}
    lines.append("  API writes per minute: " + (", ".join(f"{k} {v:.1f}" for k, v in sorted(per_minute.items()) if v)
                                                or "none"))
    return lines


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=50, help="pods in the burst")
    parser.add_argument("--sequential", type=int, default=20, help="pods started one at a time")
    parser.add_argument("--nodes", type=int, default=1, help="nodes (kubelets) in the cluster")
    parser.add_argument("--idle", type=float, default=0, help="seconds to measure the idle cost for (0: skip)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        started = time.perf_counter()
        cluster = LocalCluster(Path(tmp) / "cluster", controller=False, workdir=tmp, nodes=args.nodes)
        cluster.start()
        startup = time.perf_counter() - started
        try:
            idle = idle_cost(cluster, args.idle) if args.idle else []
            api = cluster.client()
            running, done = [], []
            for i in range(args.sequential):
                name = f"seq-{i}"
                created = time.perf_counter()
                api.create(PODS, pod(name))
                times = follow(api, {name})[name]
                running.append(times.get("Running", times["Succeeded"]) - created)
                done.append(times["Succeeded"] - created)
            burst = {f"burst-{i}" for i in range(args.pods)}
            created = time.perf_counter()
            for name in sorted(burst):
                api.create(PODS, pod(name))
            times = follow(api, burst)
            finished = max(t.get("Succeeded", t.get("Failed", 0.0)) for t in times.values()) - created
            failed = sum(1 for t in times.values() if "Failed" in t)
        finally:
            cluster.stop()
    print(f"cluster start ({args.nodes} node(s): API server, scheduler, kubelets, CRDs installed): {startup:.2f} s")
    if idle:
        print(f"idle cost over {args.idle:g} s:")
        print("\n".join(idle))
    print(f"pod create -> Running   p50 {statistics.median(running) * 1000:.0f} ms, "
          f"p90 {percentile(running, 0.9) * 1000:.0f} ms (n={len(running)})")
    print(f"pod create -> Succeeded p50 {statistics.median(done) * 1000:.0f} ms, "
          f"p90 {percentile(done, 0.9) * 1000:.0f} ms (python -c pass)")
    print(f"burst of {args.pods} pods: all finished in {finished:.2f} s "
          f"({args.pods / finished:.1f} pods/s), {failed} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
