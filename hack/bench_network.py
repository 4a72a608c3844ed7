"""The isolated pod network under load, and what a pod's sandbox costs (docs/benchmarks.md).

Two measurements, in one run:

1. ``jobs``: N two-pod PyTorchJobs (a Master and a Worker), every one on the default port
   23456, created at once on an isolated ``--nodes`` cluster with the controller. Each pod
   runs a small Python program, no torch: the Master listens on ``$MASTER_PORT``, the Worker
   connects to ``$MASTER_ADDR:$MASTER_PORT`` (retrying until the Master listens), they
   exchange a line and exit 0. Timed from the first create to the last ``Succeeded``; every
   job must succeed. The baseline is the same 2N processes started by hand on this machine
   at once, with no cluster, each pair on a port of its own (one port space cannot hold N
   listeners on 23456): the difference is what the cluster costs (API server, scheduler,
   kubelets, controller, sandboxes).
2. ``pod-start``: pods created one after another on a one-node cluster without the
   controller, each timed from its create request to the watch event that says Running;
   p50 and p90, on an isolated and on a shared cluster.

Usage: ``python hack/bench_network.py [--jobs 50] [--nodes 3] [--pods 20] [--json FILE]``
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainctl.cluster.local_cluster import LocalCluster  # noqa: E402
from trainctl.cluster.network import isolation  # noqa: E402
from trainctl.kube.restmapper import PODS, resource_for  # noqa: E402

PORT = 23456
PYTORCHJOBS = resource_for("kubeflow.org/v1", "PyTorchJob")

# One program for both roles: RANK 0 serves one peer, the others connect to it.
PROGRAM = """
import os, socket, time
host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if os.environ["RANK"] == "0":
    with socket.create_server(("0.0.0.0", port)) as server:
        peer, _ = server.accept()
        with peer:
            assert peer.makefile().readline() == "hello\\n"
            peer.sendall(b"ok\\n")
else:
    deadline = time.monotonic() + 300
    while True:
        try:
            peer = socket.create_connection((host, port), timeout=5)
            peer.settimeout(None)  # a loaded machine may take a while to answer
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with peer:
        peer.sendall(b"hello\\n")
        assert peer.makefile().readline() == "ok\\n"
"""


def job(name: str) -> dict[str, Any]:
    def replica(replicas: int) -> dict[str, Any]:
        return {"replicas": replicas, "restartPolicy": "Never", "template": {"spec": {"containers": [{
            "name": "pytorch", "image": "python:3.11", "command": [sys.executable, "-c", PROGRAM],
            "ports": [{"name": "pytorchjob-port", "containerPort": PORT}]}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(1)}}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def baseline(pairs: int) -> float:
    """The same processes, no cluster: every pair at once, each on a port of its own."""
    started = time.monotonic()
    processes = []
    for _ in range(pairs):
        port = str(free_port())
        for rank in ("0", "1"):
            env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "RANK": rank, "PATH": "/usr/bin:/bin"}
            processes.append(subprocess.Popen([sys.executable, "-c", PROGRAM], env=env))
    codes = [process.wait() for process in processes]
    assert all(code == 0 for code in codes), codes
    return time.monotonic() - started


def succeeded(obj: dict[str, Any]) -> bool:
    return any(c.get("type") == "Succeeded" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def failed(obj: dict[str, Any]) -> bool:
    return any(c.get("type") == "Failed" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def why_failed(cluster: LocalCluster, job: dict[str, Any]) -> str:
    """A failed job's last condition and each of its pods' phase and last output."""
    name = job["metadata"]["name"]
    lines = [f"{name}: {(job.get('status') or {}).get('conditions', [{}])[-1].get('message', '')}"]
    pods = cluster.client().list(PODS, "default", label_selector=f"training.kubeflow.org/job-name={name}")[0]
    for pod in pods:
        uid, status = pod["metadata"]["uid"], pod.get("status") or {}
        logs = sorted((cluster.directory / "pods" / uid).glob("*/*.log"))
        tail = logs[-1].read_text()[-600:] if logs else "(no log)"
        lines.append(f"  {pod['metadata']['name']} {status.get('phase')} {status.get('podIP')} on "
                     f"{pod['spec'].get('nodeName')}:\n{tail}")
    return "\n".join(lines)


def jobs_at_once(count: int, nodes: int, root: Path) -> dict[str, Any]:
    with LocalCluster(root / "jobs", nodes=nodes, workdir=root, network="isolated") as cluster:
        client = cluster.client()
        started = time.monotonic()
        threads = [threading.Thread(target=client.create, args=(PYTORCHJOBS, job(f"job-{i}"))) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        deadline = started + 1800
        while True:
            items = client.list(PYTORCHJOBS, "default")[0]
            done = [j for j in items if succeeded(j)]
            bad = [j["metadata"]["name"] for j in items if failed(j)]
            if bad:
                raise SystemExit(f"failed jobs: {bad}\n" + "\n".join(why_failed(cluster, j) for j in items if failed(j)))
            if len(done) == count:
                break
            assert time.monotonic() < deadline, f"only {len(done)}/{count} jobs Succeeded"
            time.sleep(0.5)
        wall = time.monotonic() - started
        pods = client.list(PODS, "default")[0]
        ips = {p["status"].get("podIP") for p in pods}
        client.close()
    return {"jobs": count, "nodes": nodes, "succeeded": count, "wall_seconds": round(wall, 1),
            "pods": len(pods), "distinct_pod_ips": len(ips)}


def pod_starts(mode: str, count: int, root: Path) -> list[float]:
    latencies = []
    with LocalCluster(root / f"pods-{mode}", controller=False, workdir=root, network=mode) as cluster:
        assert cluster.network_mode == mode, cluster.network_reason
        client = cluster.client()
        for i in range(count):
            name = f"start-{i}"
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                   "spec": {"restartPolicy": "Never", "containers": [
                       {"name": "main", "image": "python:3.11", "command": ["sleep", "600"]}]}}
            _, version = client.list(PODS, "default")
            began = time.monotonic()
            client.create(PODS, pod)
            stream = client.watch(PODS, "default", resource_version=version, timeout_seconds=120)
            try:
                for event in stream:
                    obj = event.get("object") or {}
                    if obj.get("metadata", {}).get("name") == name and (obj.get("status") or {}).get("phase") == "Running":
                        latencies.append(time.monotonic() - began)
                        break
            finally:
                stream.close()
            client.delete(PODS, "default", name, grace_period_seconds=0)
        client.close()
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    problem = isolation.isolation_problem()
    if problem:
        print(f"bench_network: the isolated network cannot run here: {problem}", file=sys.stderr)
        return 1
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-network-") as scratch:
        root = Path(scratch)
        results["baseline_seconds"] = round(baseline(args.jobs), 1)
        results["cluster"] = jobs_at_once(args.jobs, args.nodes, root)
        for mode in (isolation.ISOLATED, isolation.SHARED):
            latencies = pod_starts(mode, args.pods, root)
            results[f"pod_start_{mode}"] = {"p50": round(statistics.median(latencies), 3),
                                            "p90": round(percentile(latencies, 0.9), 3), "n": len(latencies)}
    cluster = results["cluster"]
    print(f"{cluster['jobs']} two-pod jobs on port {PORT}, {cluster['nodes']} isolated nodes: "
          f"{cluster['succeeded']}/{cluster['jobs']} Succeeded in {cluster['wall_seconds']}s "
          f"({cluster['distinct_pod_ips']} pod IPs); the same {2 * cluster['jobs']} processes without a cluster: "
          f"{results['baseline_seconds']}s")
    for mode in (isolation.ISOLATED, isolation.SHARED):
        stats = results[f"pod_start_{mode}"]
        print(f"pod start (create -> Running), {mode}: p50 {stats['p50']}s, p90 {stats['p90']}s over {stats['n']} pods")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
