"""Benchmark the controller on the embedded cluster (numbers go to docs/benchmarks.md).

Requests are counted by the embedded API server itself (``apiserver_request_total`` on its
``/metrics``), so the controller cannot flatter itself. Five measurements:

1. **writes per job lifecycle** (create → Succeeded): the controller's writes against the
   minimum, one create per pod and Service plus one status write per distinct status the
   job went through (counted by a watch on the job);
2. **idle writes**: writes per minute while jobs run unchanged (should be zero);
   **status writes per job** from creation to Succeeded for 3, 50 and 500 replicas, with
   the default ``--status-batch-period`` and without batching;
3. **a large job**: time from creating a job with ``--workers`` workers to all its pods and
   Services existing, against a plain client creating the same objects with the same
   concurrency;
4. **replacement latency**: from a failed pod's event reaching the controller to its
   replacement's creation being seen by the controller (p50, p90);
5. **memory**: the controller process's RSS with ``--cache-pods`` pods in its cache.

A stand-in kubelet (tests/support/podphase.py) moves pods to Running and the master to
Succeeded through ``pods/status``, as a kubelet would.

Usage: ``python hack/bench_controller.py [--workers 500] [--cache-pods 10000] [--idle-seconds 60]``
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from trainctl.controller.manager import Manager  # noqa: E402
from trainctl.controller.options import ManagerOptions  # noqa: E402
from trainctl.kube.client import KubeClient  # noqa: E402
from trainctl.kube.informer import Informer  # noqa: E402
from trainctl.kube.restmapper import NAMESPACES, PODS, PYTORCHJOBS, SERVICES  # noqa: E402

from tests.support.conditions import condition  # noqa: E402
from tests.support.podphase import PodPhaseDriver  # noqa: E402

WRITE_VERBS = {"CREATE", "UPDATE", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION"}


def job(name: str, namespace: str, workers: int) -> dict[str, Any]:
    def replica(n: int) -> dict[str, Any]:
        container = {
            "name": "pytorch",
            "image": "trainctl/sample:1",
            "command": ["python", "train.py"],
            "resources": {"requests": {"cpu": "1"}},
        }
        return {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
    }


class Server:
    """The embedded API server, its client, and its request counters."""

    def __init__(self, workdir: Path) -> None:
        from trainctl.cluster.apiserver.process import start_apiserver

        self.handle = start_apiserver(workdir)
        self.kubeconfig = str(self.handle.kubeconfig)
        self.client = KubeClient.from_kubeconfig(self.kubeconfig, qps=0, pool_size=64)
        self._install_crds()

    def _install_crds(self) -> None:
        from trainctl.cluster.local_cluster import install_crds

        if self.client.group_version_served("kubeflow.org", "v1"):
            return
        install_crds(self.client)
        wait_for(lambda: self.client.group_version_served("kubeflow.org", "v1"), 30, "CRDs served")

    def namespace(self, name: str) -> str:
        self.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name

    def writes(self) -> dict[tuple[str, str], float]:
        request = urllib.request.Request(f"{self.handle.url}/metrics", headers={"Authorization": f"Bearer {self.handle.token}"})
        tls = ssl.create_default_context(cafile=str(self.handle.ca_cert))
        with urllib.request.urlopen(request, timeout=10, context=tls) as response:
            text = response.read().decode()
        counts: dict[tuple[str, str], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "apiserver_request_total" and sample.labels.get("verb") in WRITE_VERBS:
                    key = (sample.labels["verb"], sample.labels["resource"])
                    counts[key] = counts.get(key, 0.0) + sample.value
        return counts

    def stop(self) -> None:
        self.handle.stop()


def diff(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, poll: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise SystemExit(f"timed out waiting for {what}")


def start_manager(server: Server, namespace: str, **options: Any) -> Manager:
    client = KubeClient.from_kubeconfig(server.kubeconfig, qps=0, pool_size=64)
    manager = Manager(client, ManagerOptions(namespace=namespace, **options))
    manager.start()
    wait_for(manager.synced, 30, "controller caches")
    return manager


# --- 1 and 2: writes -------------------------------------------------------------------------
def bench_writes(server: Server, jobs: int, workers: int, idle_seconds: float) -> dict[str, Any]:
    ns = server.namespace("bench-writes")
    manager = start_manager(server, ns)
    finish = threading.Event()

    def outcome(pod: dict, running: list[dict]) -> Optional[str]:
        is_master = pod["metadata"]["labels"].get("training.kubeflow.org/replica-type") == "master"
        return "Succeeded" if is_master and finish.is_set() and len(running) == workers + 1 else None

    driver = PodPhaseDriver(server.client, ns, outcome).start()
    states: dict[str, list[str]] = {}
    watcher = Informer(server.client, PYTORCHJOBS, namespace=ns)

    def on_job(event_type: str, new: Optional[dict], old: Optional[dict]) -> None:
        if new is not None:
            status = json.dumps(new.get("status") or {}, sort_keys=True)
            seen = states.setdefault(new["metadata"]["name"], [])
            if not seen or seen[-1] != status:
                seen.append(status)

    watcher.add_handler(on_job)
    watcher.start()
    before = server.writes()
    names = [f"life-{i}" for i in range(jobs)]
    for name in names:
        server.client.create(PYTORCHJOBS, job(name, ns, workers))
    wait_for(lambda: all(condition(watcher.store.get(ns, n), "Running") for n in names), 60, "jobs Running")
    # Let every pod report Running and the status settle, then count idle writes.
    wait_for(
        lambda: all(
            ((watcher.store.get(ns, n) or {}).get("status") or {}).get("replicaStatuses", {}).get("Worker", {}).get("active")
            == workers
            for n in names
        ),
        60,
        "all workers active",
    )
    time.sleep(1.0)  # let in-flight writes land before the idle window opens
    idle_before = server.writes()
    time.sleep(idle_seconds)
    idle = diff(server.writes(), idle_before)
    idle_controller = {k: v for k, v in idle.items() if k != ("UPDATE", "pods")}
    finish.set()
    # Nudge each master so the driver re-evaluates (a pod event), as a kubelet's next status would.
    for name in names:
        pod = driver.informer.store.get(ns, f"{name}-master-0")
        driver.set_phase(pod, "Succeeded", 0)
    wait_for(lambda: all(condition(watcher.store.get(ns, n), "Succeeded") for n in names), 60, "jobs Succeeded")
    time.sleep(1.0)
    total = diff(server.writes(), before)
    driver.stop()
    watcher.stop()
    manager.stop()
    # The driver's pod status writes and the benchmark's own job creates are not the controller's.
    controller = {k: v for k, v in total.items() if k not in (("UPDATE", "pods"), ("CREATE", "pytorchjobs"))}
    events = controller.pop(("CREATE", "events"), 0.0)
    distinct_states = sum(len(states[n]) - 1 for n in names)  # the first is the empty status at creation
    creates = jobs * 2 * (workers + 1)
    minimum = creates + distinct_states
    # The strictest reading: one status write per condition the job ever got (Created,
    # Running, Succeeded), as if replica counts never changed on their own.
    conditions = sum(len(json.loads(states[n][-1]).get("conditions") or []) for n in names)
    writes = sum(controller.values())
    return {
        "jobs": jobs,
        "pods_per_job": workers + 1,
        "controller_writes": writes,
        "by_verb_resource": {f"{v} {r}": n for (v, r), n in sorted(controller.items())},
        "events_written": events,
        "distinct_status_states": distinct_states,
        "minimum": minimum,
        "ratio": round(writes / minimum, 3),
        "minimum_conditions_only": creates + conditions,
        "ratio_conditions_only": round(writes / (creates + conditions), 3),
        "idle_seconds": idle_seconds,
        "idle_writes_per_minute": round(sum(idle_controller.values()) * 60 / idle_seconds, 2),
    }


# --- 2b: status writes per job -----------------------------------------------------------------
def bench_status_writes(server: Server, replicas: list[int], batch_periods: list[float]) -> list[dict[str, Any]]:
    """Status writes of one job from creation to Succeeded, its pods starting as fast as the
    stand-in kubelet can move them, for each job size and each ``--status-batch-period``."""
    rows = []
    for period in batch_periods:
        for size in replicas:
            ns = server.namespace(f"bench-status-{size}-{str(period).replace('.', '-')}")
            manager = start_manager(server, ns, status_batch_period=period)

            def outcome(pod: dict, running: list[dict], size: int = size) -> Optional[str]:
                is_master = pod["metadata"]["labels"].get("training.kubeflow.org/replica-type") == "master"
                return "Succeeded" if is_master and len(running) >= size else None

            driver = PodPhaseDriver(server.client, ns, outcome).start()
            before = server.writes()
            start = time.monotonic()
            server.client.create(PYTORCHJOBS, job("status", ns, size - 1))
            jobs = manager.caches.job_informers["PyTorchJob"].store
            wait_for(lambda jobs=jobs, ns=ns: condition(jobs.get(ns, "status"), "Succeeded"), 600, f"{size}-replica job Succeeded")
            seconds = time.monotonic() - start
            time.sleep(max(1.5, period * 1.5))  # writes still held by the batch period land
            written = diff(server.writes(), before)
            driver.stop()
            manager.stop()
            rows.append({
                "replicas": size,
                "status_batch_period": period,
                "status_writes": int(written.get(("UPDATE", "pytorchjobs"), 0)),  # the controller updates only status
                "seconds_to_succeeded": round(seconds, 2),
            })
            print("status:", json.dumps(rows[-1]), flush=True)
    return rows


# --- 3: a large job --------------------------------------------------------------------------
def bench_large_job(workers: int, concurrency: int, repeat: int) -> dict[str, Any]:
    """Each run gets a fresh API server, so neither side meets the other's objects; the two
    sides alternate and the medians are compared (the machine is shared and noisy)."""
    plain: list[float] = []
    controller: list[float] = []
    count = 0
    for _ in range(repeat):
        for side in ("plain", "controller"):
            with tempfile.TemporaryDirectory(prefix=f"bench-{side}-") as workdir:
                server = Server(Path(workdir))
                try:
                    if side == "plain":
                        seconds, count = _plain_client_creates(server, workers, concurrency)
                        plain.append(seconds)
                    else:
                        controller.append(_controller_creates(server, workers, concurrency))
                finally:
                    server.stop()
    return {
        "workers": workers,
        "objects": count,
        "concurrency": concurrency,
        "runs": repeat,
        "controller_seconds": [round(x, 2) for x in controller],
        "plain_client_seconds": [round(x, 2) for x in plain],
        "ratio_of_medians": round(statistics.median(controller) / statistics.median(plain), 3),
    }


def _plain_client_creates(server: Server, workers: int, concurrency: int) -> tuple[float, int]:
    """The very pods and Services the reconcile core renders for the job, POSTed by a plain
    client with the same concurrency (without ownerReferences: there is no job to own them)."""
    from datetime import datetime, timezone

    from trainctl.controller.reconcile import ReconcileConfig, reconcile
    from trainctl.controller.reconcile.plan import Observed

    base_ns = server.namespace("bench-plain")
    rendered = job("large", base_ns, workers)
    rendered["metadata"]["uid"] = "00000000-0000-0000-0000-0000000000aa"
    # Every object in one plan (the controller spreads them over passes of max_creates_per_pass).
    plan = reconcile(rendered, Observed(), datetime.now(timezone.utc), ReconcileConfig(max_creates_per_pass=workers + 1))
    objects = [(PODS if o["kind"] == "Pod" else SERVICES, o) for o in plan.creates if o["kind"] in ("Pod", "Service")]
    for _, obj in objects:
        obj["metadata"].pop("ownerReferences", None)
    plain = KubeClient.from_kubeconfig(server.kubeconfig, qps=0, pool_size=64)
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(lambda item: plain.create(*item), objects))
    return time.monotonic() - start, len(objects)


def _controller_creates(server: Server, workers: int, concurrency: int) -> float:
    ns = server.namespace("bench-large")
    manager = start_manager(server, ns, create_concurrency=concurrency)
    pods = manager.caches.child_informers["Pod"].store
    services = manager.caches.child_informers["Service"].store
    expected = workers + 1
    start = time.monotonic()
    server.client.create(PYTORCHJOBS, job("large", ns, workers))
    wait_for(lambda: len(pods) >= expected and len(services) >= expected, 300, "all pods and services", poll=0.005)
    controller_seconds = time.monotonic() - start
    manager.stop()
    return controller_seconds


# --- 4: replacement latency ------------------------------------------------------------------
def bench_replacement(server: Server, failures: int) -> dict[str, Any]:
    ns = server.namespace("bench-replace")
    manager = start_manager(server, ns)
    failed_at: dict[str, float] = {}
    latencies: list[float] = []
    replaced = threading.Condition()

    def on_pod(event_type: str, new: Optional[dict], old: Optional[dict]) -> None:
        now = time.monotonic()
        if new is None:
            return
        name = new["metadata"]["name"]
        if (new.get("status") or {}).get("phase") == "Failed" and name not in failed_at:
            failed_at[name] = now
        elif event_type == "ADDED" and name in failed_at:
            with replaced:
                latencies.append(now - failed_at.pop(name))
                replaced.notify_all()

    manager.caches.child_informers["Pod"].add_handler(on_pod)
    driver = PodPhaseDriver(server.client, ns, lambda pod, running: None).start()
    workers = 4
    server.client.create(PYTORCHJOBS, job("replace", ns, workers))
    store = driver.informer.store

    def running(name: str) -> Optional[dict]:
        pod = store.get(ns, name)
        return (
            pod
            if pod and (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
            else None
        )

    for i in range(failures):
        name = f"replace-worker-{i % workers}"
        pod = wait_for(lambda name=name: running(name), 60, f"{name} running")
        driver.set_phase(pod, "Failed", 137)
        with replaced:
            if not replaced.wait_for(lambda i=i: len(latencies) > i, 60):
                raise SystemExit(f"{name} was not replaced")
    driver.stop()
    manager.stop()
    latencies.sort()
    return {
        "failures": failures,
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p90_ms": round(latencies[int(0.9 * (len(latencies) - 1))] * 1000, 1),
        "max_ms": round(latencies[-1] * 1000, 1),
    }


# --- 5: memory -------------------------------------------------------------------------------
def bench_memory(server: Server, count: int) -> dict[str, Any]:
    ns = server.namespace("bench-memory")
    owner = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "big",
        "uid": "00000000-0000-0000-0000-00000000b19",
        "controller": True,
        "blockOwnerDeletion": True,
    }

    def pod(i: int) -> dict[str, Any]:
        env = [
            {"name": n, "value": v}
            for n, v in (
                ("MASTER_ADDR", "big-master-0"),
                ("MASTER_PORT", "23456"),
                ("WORLD_SIZE", str(count)),
                ("RANK", str(i)),
                ("PYTHONUNBUFFERED", "1"),
            )
        ]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"big-worker-{i}",
                "namespace": ns,
                "labels": {
                    "training.kubeflow.org/operator-name": "pytorchjob-controller",
                    "training.kubeflow.org/job-name": "big",
                    "training.kubeflow.org/replica-type": "worker",
                    "training.kubeflow.org/replica-index": str(i),
                },
                "ownerReferences": [owner],
            },
            "spec": {
                "restartPolicy": "OnFailure",
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "trainctl/sample:1",
                        "command": ["torchrun", "train.py"],
                        "env": env,
                        "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                    }
                ],
            },
        }

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda i: server.client.create(PODS, pod(i)), range(count)))
    health = 18081
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainctl.cli.main",
            "controller",
            "--kubeconfig",
            server.kubeconfig,
            "--metrics-port",
            "0",
            "--health-port",
            str(health),
            "--bind-address",
            "127.0.0.1",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for(ready, 300, "controller ready", poll=0.2)
        time.sleep(2.0)  # let the reconciles the initial list queued run out
        rss_kb = int(
            next(
                line.split()[1] for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines() if line.startswith("VmRSS")
            )
        )
    finally:
        proc.terminate()
        proc.wait(30)
    return {"cached_pods": count, "rss_mb": round(rss_kb / 1024, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5, help="jobs in the lifecycle measurement")
    parser.add_argument("--job-workers", type=int, default=4, help="workers per job in the lifecycle measurement")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=500, help="workers of the large job")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3, help="runs of the large-job comparison")
    parser.add_argument("--failures", type=int, default=20)
    parser.add_argument("--cache-pods", type=int, default=10_000)
    parser.add_argument("--status-replicas", type=int, nargs="+", default=[3, 50, 500], help="job sizes of the status-write measurement")
    parser.add_argument("--status-batch-periods", type=float, nargs="+", default=[1.0, 0.0],
                        help="--status-batch-period values to compare (0 = a status write per burst of pod changes)")
    parser.add_argument("--only", choices=("writes", "status", "large", "replacement", "memory"), action="append")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    only = set(args.only or ("writes", "status", "large", "replacement", "memory"))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-controller-") as workdir:
        server = Server(Path(workdir))
        try:
            if "writes" in only:
                results["writes"] = bench_writes(server, args.jobs, args.job_workers, args.idle_seconds)
                print("writes:", json.dumps(results["writes"]), flush=True)
            if "status" in only:
                results["status"] = bench_status_writes(server, args.status_replicas, args.status_batch_periods)
            if "large" in only:
                results["large"] = bench_large_job(args.workers, args.concurrency, args.repeat)
                print("large:", json.dumps(results["large"]), flush=True)
            if "replacement" in only:
                results["replacement"] = bench_replacement(server, args.failures)
                print("replacement:", json.dumps(results["replacement"]), flush=True)
            if "memory" in only:
                results["memory"] = bench_memory(server, args.cache_pods)
                print("memory:", json.dumps(results["memory"]), flush=True)
        finally:
            server.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
