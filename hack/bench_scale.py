"""A thousand jobs at once: the controller and the embedded control plane at cluster scale.

``python hack/bench_scale.py`` (full size, numbers go to docs/benchmarks.md) or ``--quick``
(a CI-sized smoke run; ``tests/hack/test_bench_scale.py`` runs it and checks what happened,
not how fast). On an embedded cluster of hollow nodes (kubemark's: one process registers
them all, heartbeats their Leases and reports their pods Running, see
``trainctl/cluster/kubelet/hollow.py``) and two controller replicas with leader election:

1. PyTorchJobs of 1 Master + ``--workers`` Workers are created at ``--create-rate`` jobs/s
   in three batches, to 10 %, 30 % and 100 % of ``--jobs``; a share are elastic (Workers
   only, with an HPA), a share have every Worker fail once (exit 143, ``ExitCode``: the
   controller replaces them). After each batch, once every pod runs, the steady state is
   measured for ``--steady-seconds``: controller CPU share, its API writes per minute (goal 0),
   the other components' CPU.
2. Failover: the leader is killed (SIGKILL) and a probe job created; timed until the standby
   holds the Lease and until the probe job's pods exist.
3. Every pod is told to finish (``hollow.trainctl.io/run-until``), and the bench waits for
   every job to be Succeeded.
4. A plain client creates pods on the same API server from 32 threads, for the controller's
   creates per second to be compared with.

Measured: job created -> all its pods created, -> all Running (p50/p99); controller CPU
seconds per job and per pod event, peak RSS, API requests per job by verb, work queue depth
and longest wait; API server, scheduler, control plane and hollow-node CPU and peak RSS;
scheduling throughput; the failover; the steady states. ``--json FILE`` keeps them,
``--plot FILE`` draws the steady state against the number of running jobs (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from hack.bench_local import cpu_rss, percentile  # noqa: E402
from trainctl.api.constants import LABEL_JOB_NAME, LABEL_REPLICA_TYPE  # noqa: E402
from trainctl.cluster.kubelet.hollow import FAIL_AFTER_SECONDS, FAIL_RUNS, RUN_UNTIL  # noqa: E402
from trainctl.cluster.local_cluster import LocalCluster  # noqa: E402
from trainctl.kube.client import ApiError, KubeClient  # noqa: E402
from trainctl.kube.informer import Informer  # noqa: E402
from trainctl.kube.restmapper import NAMESPACES, PODS, PYTORCHJOBS  # noqa: E402

NAMESPACE = "bench-scale"
WRITE_VERBS = {"create", "update", "patch", "delete", "CREATE", "UPDATE", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION"}
TRAINING_TYPES = {"master", "worker"}


@dataclass(frozen=True)
class Size:
    nodes: int
    jobs: int
    workers: int
    steady_seconds: float
    create_rate: float  # jobs per second
    elastic_share: float
    fail_share: float


FULL = Size(nodes=1000, jobs=1000, workers=9, steady_seconds=30, create_rate=1000 / 60, elastic_share=0.1, fail_share=0.1)
QUICK = Size(nodes=10, jobs=10, workers=3, steady_seconds=3, create_rate=5, elastic_share=0.2, fail_share=0.2)


# --- the jobs --------------------------------------------------------------------------------
def job_manifest(name: str, workers: int, elastic: bool, failing: bool) -> dict[str, Any]:
    """1 Master + ``workers`` Workers (elastic: ``workers + 1`` Workers and an HPA); a failing
    job's Workers each fail once."""

    def replica(count: int, fail: bool) -> dict[str, Any]:
        annotations = {FAIL_RUNS: "1", FAIL_AFTER_SECONDS: "1"} if fail else {}
        return {"replicas": count, "restartPolicy": "ExitCode", "template": {
            "metadata": {"annotations": annotations},
            "spec": {"containers": [{"name": "pytorch", "image": "trainctl/bench:1", "command": ["python", "train.py"],
                                     "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}}}

    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Worker": replica(workers + 1 if elastic else workers, failing)}}
    if elastic:
        spec["elasticPolicy"] = {"rdzvBackend": "c10d", "minReplicas": max(1, (workers + 1) // 2),
                                 "maxReplicas": workers + 1, "metrics": [{"type": "Resource", "resource": {
                                     "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}
    else:
        spec["pytorchReplicaSpecs"]["Master"] = replica(1, False)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec}


@dataclass
class JobTrack:
    created: float
    expected: int
    names: set[str] = field(default_factory=set)
    phases: dict[str, tuple[str, str]] = field(default_factory=dict)  # pod name -> (uid, phase) of its latest pod
    def running_now(self) -> bool:
        """Every pod of the job Running at once (a failed one replaced and running again)."""
        return len(self.phases) >= self.expected and all(phase == "Running" for _, phase in self.phases.values())

    all_created: Optional[float] = None
    all_running: Optional[float] = None
    succeeded: Optional[float] = None


class Tracker:
    """The bench's own watch on the jobs' pods and the jobs: when each job's pods existed and
    ran, failures and replacements, bindings, and how many pod events there were."""

    def __init__(self, client: KubeClient) -> None:
        self.jobs: dict[str, JobTrack] = {}
        self.lock = threading.Lock()
        self.pod_events = 0
        self.failed: set[str] = set()  # uids seen Failed
        self.uids_by_name: dict[str, set[str]] = {}
        self.bound_at: dict[str, float] = {}  # uid -> when first seen bound
        self.created_at: dict[str, float] = {}  # uid -> when first seen
        self.running_at: dict[str, float] = {}  # uid -> when first seen Running
        self.pods = Informer(client, PODS, namespace=NAMESPACE, retry_delay=0.05)
        self.pods.add_handler(self._on_pod)
        self.job_informer = Informer(client, PYTORCHJOBS, namespace=NAMESPACE, retry_delay=0.05)
        self.job_informer.add_handler(self._on_job)

    def start(self) -> None:
        self.pods.start()
        self.job_informer.start()
        self.pods.synced.wait(60)
        self.job_informer.synced.wait(60)

    def stop(self) -> None:
        self.pods.stop()
        self.job_informer.stop()

    def expect(self, name: str, created: float, pods: int) -> None:
        with self.lock:
            self.jobs[name] = JobTrack(created, pods)

    def _on_pod(self, event: str, new: Optional[dict], old: Optional[dict]) -> None:
        now = time.monotonic()
        pod = new or old or {}
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        uid, name = meta.get("uid", ""), meta.get("name", "")
        with self.lock:
            self.pod_events += 1
            if event == "DELETED":
                return
            self.created_at.setdefault(uid, now)
            self.uids_by_name.setdefault(name, set()).add(uid)
            if (pod.get("spec") or {}).get("nodeName"):
                self.bound_at.setdefault(uid, now)
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Failed":
                self.failed.add(uid)
            if phase == "Running":
                self.running_at.setdefault(uid, now)
            track = self.jobs.get(labels.get(LABEL_JOB_NAME, ""))
            if track is None or labels.get(LABEL_REPLICA_TYPE) not in TRAINING_TYPES:
                return
            track.names.add(name)
            latest = track.phases.get(name)
            if latest is None or self.created_at[uid] >= self.created_at.get(latest[0], 0):  # this pod or a newer one
                track.phases[name] = (uid, phase or "Pending")
            if track.all_created is None and len(track.names) >= track.expected:
                track.all_created = now
            if track.all_running is None and track.running_now():
                track.all_running = now

    def _on_job(self, event: str, new: Optional[dict], old: Optional[dict]) -> None:
        job = new or {}
        conditions = (job.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Succeeded" and c.get("status") == "True" for c in conditions):
            with self.lock:
                track = self.jobs.get(job["metadata"]["name"])
                if track is not None and track.succeeded is None:
                    track.succeeded = time.monotonic()

    def count(self, predicate: Callable[[JobTrack], bool]) -> int:
        with self.lock:
            return sum(1 for track in self.jobs.values() if predicate(track))

    def replaced(self) -> int:
        """Pod names that had more than one pod: failed pods the controller replaced."""
        with self.lock:
            return sum(len(uids) - 1 for uids in self.uids_by_name.values())


# --- processes and their numbers -------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


class Controller:
    """One ``trainctl controller`` replica with leader election, its metrics and /proc numbers."""

    def __init__(self, name: str, cluster: LocalCluster, args: list[str]) -> None:
        self.name = name
        self.metrics_port = free_port()
        log = open(cluster.directory / "logs" / f"controller-{name}.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trainctl.cli.main", "controller", "--kubeconfig", str(cluster.kubeconfig),
             "--leader-elect", "--identity", name, "--metrics-port", str(self.metrics_port), "--health-port", "0",
             "--bind-address", "127.0.0.1", *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.last: dict[str, dict] = {}  # the last metrics scraped (kept after a kill)
        self.cpu = 0.0
        self.peak_rss = 0
        self.dead = False

    def sample(self) -> None:
        if self.dead:
            return
        try:
            self.last = scrape(self.metrics_port)
            self.cpu = cpu_rss(self.process.pid)[0]
            self.peak_rss = peak_rss_kib(self.process.pid)
        except (OSError, ValueError):
            pass

    def value(self, name: str, **labels: str) -> float:
        return sum(v for key, v in self.last.get(name, {}).items() if all((k, labels[k]) in key for k in labels))

    def by_verb(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for key, value in self.last.get("trainctl_api_requests_total", {}).items():
            counts[dict(key)["verb"]] += value
        return counts

    def writes(self) -> float:
        return sum(v for verb, v in self.by_verb().items() if verb in WRITE_VERBS)

    @property
    def leader(self) -> bool:
        return self.value("trainctl_leader") == 1

    def kill(self) -> None:
        self.sample()
        self.dead = True
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


class Sampler(threading.Thread):
    """Scrapes the controllers every ``interval``: queue depth, and /proc."""

    def __init__(self, controllers: list[Controller], interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.controllers = controllers
        self.interval = interval
        self.max_depth = 0.0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            for controller in self.controllers:
                controller.sample()
                self.max_depth = max(self.max_depth, controller.value("trainctl_workqueue_depth"))


def apiserver_requests(client: KubeClient) -> Counter[tuple[str, str]]:
    """The API server's own count of every request so far, by (verb, resource)."""
    text = client._request("GET", "/metrics", verb="get").data.decode()
    counts: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "apiserver_request_total":
                counts[(sample.labels["verb"], sample.labels["resource"])] += sample.value
    return counts


def component_pids(cluster: LocalCluster) -> dict[str, int]:
    parts = {"API server": cluster.apiserver, "scheduler": cluster.scheduler, "control plane": cluster.controlplane,
             "hollow nodes": cluster.hollow}
    pids = {name: c.pid for name, c in parts.items() if c is not None and c.pid}
    if "hollow nodes" in pids:  # the heartbeats run in a child process of their own
        with open(f"/proc/{pids['hollow nodes']}/task/{pids['hollow nodes']}/children") as children:
            for child in children.read().split()[:1]:
                pids["hollow heartbeats"] = int(child)
    return pids


def cpu_of(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu_rss(pid)[0] for name, pid in pids.items()}


def wait_until(predicate: Callable[[], bool], timeout: float, poll: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return predicate()


def leader_of(controllers: list[Controller]) -> Optional[Controller]:
    for controller in controllers:
        controller.sample()
    return next((c for c in controllers if not c.dead and c.leader), None)


# --- the phases -------------------------------------------------------------------------------
class Bench:
    def __init__(self, size: Size, cluster: LocalCluster, controllers: list[Controller]) -> None:
        self.size = size
        self.cluster = cluster
        self.client = KubeClient.from_kubeconfig(str(cluster.kubeconfig), qps=0, pool_size=32)
        self.controllers = controllers
        self.tracker = Tracker(self.client)
        self.pids = component_pids(cluster)
        self.created = 0
        self.report: dict[str, Any] = {"size": size.__dict__, "steady": [], "loadavg": {}}

    def controller_cpu(self) -> float:
        return sum(c.cpu for c in self.controllers)

    def controller_writes(self) -> float:
        return sum(c.writes() for c in self.controllers)

    # 1. creation in batches, a steady state after each
    def create_jobs(self, upto: int) -> None:
        interval = 1 / self.size.create_rate
        elastic_every = round(1 / self.size.elastic_share) if self.size.elastic_share else 0
        fail_every = round(1 / self.size.fail_share) if self.size.fail_share else 0
        next_at = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            while self.created < upto:
                index = self.created
                elastic = bool(elastic_every) and index % elastic_every == elastic_every - 1
                failing = bool(fail_every) and index % fail_every == fail_every // 2
                name = f"job-{index:04d}"
                manifest = job_manifest(name, self.size.workers, elastic, failing)
                self.tracker.expect(name, time.monotonic(), self.size.workers + 1)
                pool.submit(self.client.create, PYTORCHJOBS, manifest)
                self.created += 1
                next_at += interval
                time.sleep(max(0.0, next_at - time.monotonic()))

    def wait_running(self, timeout: float) -> float:
        start = time.monotonic()
        ok = wait_until(lambda: self.tracker.count(JobTrack.running_now) >= self.created, timeout, 0.5)
        if not ok:
            print(f"  not every job running after {timeout:.0f}s: "
                  f"{self.tracker.count(JobTrack.running_now)} of {self.created}", flush=True)
        return time.monotonic() - start

    def steady(self) -> dict[str, Any]:
        seconds = self.size.steady_seconds
        time.sleep(min(5.0, seconds))  # the last status writes of the batch settle
        for controller in self.controllers:
            controller.sample()
        cpu, writes, parts = self.controller_cpu(), self.controller_writes(), cpu_of(self.pids)
        verbs_before, server_before = self.leader_verbs(), apiserver_requests(self.client)
        start = time.monotonic()
        time.sleep(seconds)
        for controller in self.controllers:
            controller.sample()
        elapsed = time.monotonic() - start
        after = cpu_of(self.pids)
        server = apiserver_requests(self.client) - server_before
        # Only the controllers' leader election UPDATEs Leases (the hollow nodes PATCH theirs).
        election = server[("UPDATE", "leases")]
        verbs = {k: v - verbs_before.get(k, 0) for k, v in self.leader_verbs().items() if v - verbs_before.get(k, 0)}
        result = {
            "jobs": self.created, "seconds": round(elapsed, 1), "loadavg": os.getloadavg()[0],
            "controller_cpu_share": (self.controller_cpu() - cpu) / elapsed,
            "controller_writes_per_minute": (self.controller_writes() - writes - election) * 60 / elapsed,
            "leader_election_writes_per_minute": election * 60 / elapsed,
            "api_writes_per_minute": {f"{verb} {resource}": n * 60 / elapsed for (verb, resource), n in sorted(server.items())
                                      if verb in WRITE_VERBS},
            "controller_requests_per_minute": {k: v * 60 / elapsed for k, v in verbs.items()},
            "controller_rss_mib": max(c.peak_rss for c in self.controllers) / 1024,
            "cpu_share": {name: (after[name] - parts[name]) / elapsed for name in parts},
        }
        print(f"  steady state with {self.created} jobs: controller CPU {100 * result['controller_cpu_share']:.1f} %, "
              f"writes/min {result['controller_writes_per_minute']:.1f}, load {result['loadavg']:.1f}", flush=True)
        return result

    def leader_verbs(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for controller in self.controllers:
            total.update(controller.by_verb())
        return total

    # 2. failover
    def failover(self, timeout: float) -> dict[str, Any]:
        leader = leader_of(self.controllers)
        standby = next(c for c in self.controllers if c is not leader and not c.dead)
        assert leader is not None, "no leader"
        killed = time.monotonic()
        leader.kill()
        self.tracker.expect("probe", time.monotonic(), 2)
        self.client.create(PYTORCHJOBS, job_manifest("probe", 1, elastic=False, failing=False))
        took_lease = None
        deadline = killed + timeout
        while time.monotonic() < deadline:
            standby.sample()
            if standby.leader:
                took_lease = time.monotonic() - killed
                break
            time.sleep(0.1)
        wait_until(lambda: self.tracker.jobs["probe"].all_created is not None, max(1.0, deadline - time.monotonic()), 0.05)
        probe = self.tracker.jobs["probe"]
        acted = probe.all_created - killed if probe.all_created else None
        result = {"lease_taken_s": took_lease, "acted_s": acted, "killed": leader.name, "new_leader": standby.name,
                  "leader_longest_queue_wait_s": leader.value("trainctl_workqueue_longest_wait_seconds")}
        print(f"  failover: lease taken after {took_lease}, probe job's pods created after {acted}", flush=True)
        return result

    # 3. finish
    def finish(self, timeout: float) -> tuple[float, int]:
        """Tell every running pod to end (``run-until``) and wait for every job to succeed.
        Pods still running half a minute later are told again, and counted (the hollow
        nodes' status writes may still be catching up; a lost watch event would show too)."""
        def running() -> list[dict]:
            return [p for p in self.tracker.pods.store.list() if (p.get("status") or {}).get("phase") == "Running"]

        def annotate(pods: list[dict]) -> None:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))

            def one(pod: dict) -> None:
                try:
                    self.client.patch(PODS, NAMESPACE, pod["metadata"]["name"],
                                      {"metadata": {"annotations": {RUN_UNTIL: stamp}}})
                except ApiError:
                    pass

            with ThreadPoolExecutor(16) as pool:
                list(pool.map(one, pods))

        start = time.monotonic()
        annotate(running())
        again = 0
        total = self.created
        while not wait_until(lambda: self.tracker.count(lambda t: t.succeeded is not None) >= total, 30, 0.5):
            if time.monotonic() - start > timeout:
                break
            late = running()
            again += len(late)
            annotate(late)
        return time.monotonic() - start, again

    # 4. a plain client on the same server
    def plain_client_creates(self, count: int) -> float:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "bench-plain"},
               "spec": {"schedulerName": "nobody", "containers": [
                   {"name": "pytorch", "image": "trainctl/bench:1", "command": ["python", "train.py"],
                    "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}}
        self.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-plain"}})

        def create(index: int) -> None:
            self.client.create(PODS, {**pod, "metadata": {**pod["metadata"], "name": f"plain-{index}"}})

        start = time.monotonic()
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(create, range(count)))
        return count / (time.monotonic() - start)


def busiest(times: list[float], window: float) -> float:
    """The most events in any ``window`` seconds, per second."""
    times = sorted(times)
    best, low = 0, 0
    for high, moment in enumerate(times):
        while moment - times[low] > window:
            low += 1
        best = max(best, high - low + 1)
    return best / window


def run(size: Size, directory: Path, controller_args: list[str]) -> dict[str, Any]:
    started = time.monotonic()
    cluster = LocalCluster(directory, nodes=0, hollow_nodes=size.nodes, controller=False)
    print(f"starting a cluster of {size.nodes} hollow nodes in {directory}", flush=True)
    cluster.start(timeout=300)
    controllers: list[Controller] = []
    sampler: Optional[Sampler] = None
    try:
        report: dict[str, Any] = {"cluster_start_s": time.monotonic() - started}
        cluster.client().create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        controllers = [Controller(name, cluster, controller_args) for name in ("a", "b")]
        if not wait_until(lambda: leader_of(controllers) is not None, 60):
            raise SystemExit("no controller became leader")
        bench = Bench(size, cluster, controllers)
        bench.tracker.start()
        sampler = Sampler(controllers)
        sampler.start()
        report.update(bench.report)
        report["loadavg"]["start"] = os.getloadavg()
        cpu_start, parts_start = bench.controller_cpu(), cpu_of(bench.pids)
        first_create = time.monotonic()
        batches = sorted({max(1, round(size.jobs * share)) for share in (0.1, 0.3, 1.0)})
        for target in batches:
            print(f"creating jobs up to {target}", flush=True)
            bench.create_jobs(target)
            waited = bench.wait_running(timeout=600)
            print(f"  all {target} jobs running {waited:.1f}s after the last create", flush=True)
            report["steady"].append(bench.steady())
        report["all_running_s"] = max((t.all_running or 0) for t in bench.tracker.jobs.values()) - first_create
        report["failover"] = bench.failover(timeout=90)
        report["finish_s"], report["finish_told_again"] = bench.finish(timeout=600)
        for controller in controllers:
            controller.sample()
        done = bench.tracker
        jobs = {name: t for name, t in done.jobs.items() if name != "probe"}
        to_created = [t.all_created - t.created for t in jobs.values() if t.all_created]
        to_running = [t.all_running - t.created for t in jobs.values() if t.all_running]
        verbs = bench.leader_verbs()
        # Kubernetes' pod start-up SLO: a pod's creation to Running, as a watch sees both.
        startup = [done.running_at[uid] - at for uid, at in done.created_at.items() if uid in done.running_at]
        pods_total = len(done.created_at)
        report.update({
            "jobs": len(jobs),
            "jobs_succeeded": sum(1 for t in jobs.values() if t.succeeded),
            "pods": pods_total,
            "pods_failed": len(done.failed),
            "pods_replaced": done.replaced(),
            "pod_events": done.pod_events,
            "created_p50_s": statistics.median(to_created) if to_created else None,
            "created_p99_s": percentile(to_created, 0.99) if to_created else None,
            "running_p50_s": statistics.median(to_running) if to_running else None,
            "running_p99_s": percentile(to_running, 0.99) if to_running else None,
            "pod_startup_p50_s": statistics.median(startup) if startup else None,
            "pod_startup_p99_s": percentile(startup, 0.99) if startup else None,
            "controller_cpu_s": bench.controller_cpu() - cpu_start,
            "controller_peak_rss_mib": max(c.peak_rss for c in controllers) / 1024,
            "requests_per_job": {verb: count / len(jobs) for verb, count in sorted(verbs.items())},
            "queue_depth_max": sampler.max_depth,
            # The first leader's; the standby's queue fills while it waits for the Lease.
            "queue_longest_wait_s": report["failover"]["leader_longest_queue_wait_s"],
            "scheduling_pods_per_s": busiest(list(done.bound_at.values()), 10.0),
            "controller_creates_per_s": busiest(list(done.created_at.values()), 10.0),
        })
        report["controller_cpu_per_job_s"] = report["controller_cpu_s"] / len(jobs)
        report["controller_cpu_per_pod_event_ms"] = 1000 * report["controller_cpu_s"] / max(1, done.pod_events)
        parts_end = cpu_of(bench.pids)
        report["components"] = {name: {"cpu_s": parts_end[name] - parts_start[name],
                                       "peak_rss_mib": peak_rss_kib(pid) / 1024}
                                for name, pid in bench.pids.items()}
        report["loadavg"]["end"] = os.getloadavg()
        report["plain_client_creates_per_s"] = bench.plain_client_creates(min(2000, 200 * size.nodes))
        report["wall_s"] = time.monotonic() - started
        bench.tracker.stop()
        return report
    finally:
        if sampler is not None:
            sampler.stopped.set()
        for controller in controllers:
            controller.stop()
        cluster.stop()


# --- output ----------------------------------------------------------------------------------
def table(report: dict[str, Any]) -> str:
    def fmt(value: Any, unit: str = "", digits: int = 2) -> str:
        return "—" if value is None else f"{value:.{digits}f}{unit}"

    failover = report["failover"]
    rows = [
        ("jobs Succeeded / created", f"{report['jobs_succeeded']} / {report['jobs']}"),
        ("pods (failed, replaced)", f"{report['pods']} ({report['pods_failed']}, {report['pods_replaced']})"),
        ("job created → all its pods created, p50 / p99", f"{fmt(report['created_p50_s'], ' s')} / {fmt(report['created_p99_s'], ' s')}"),
        ("job created → all its pods Running, p50 / p99", f"{fmt(report['running_p50_s'], ' s')} / {fmt(report['running_p99_s'], ' s')}"),
        ("pod created → Running (the pod start-up SLO's measure), p50 / p99",
         f"{fmt(report['pod_startup_p50_s'], ' s')} / {fmt(report['pod_startup_p99_s'], ' s')}"),
        ("controller CPU per job / per pod event", f"{fmt(report['controller_cpu_per_job_s'], ' s', 3)} / "
                                                   f"{fmt(report['controller_cpu_per_pod_event_ms'], ' ms', 3)}"),
        ("controller peak RSS", fmt(report["controller_peak_rss_mib"], " MiB", 0)),
        ("controller API requests per job", ", ".join(f"{verb} {n:.1f}" for verb, n in report["requests_per_job"].items())),
        ("controller creates, busiest 10 s / plain client (32 threads)",
         f"{report['controller_creates_per_s']:.0f}/s / {report['plain_client_creates_per_s']:.0f}/s"),
        ("work queue: deepest / longest wait", f"{report['queue_depth_max']:.0f} / {fmt(report['queue_longest_wait_s'], ' s')}"),
        ("scheduling throughput, busiest 10 s", f"{report['scheduling_pods_per_s']:.0f} pods/s"),
        ("failover: leader killed → standby holds the Lease / acts",
         f"{fmt(failover['lease_taken_s'], ' s')} / {fmt(failover['acted_s'], ' s')}"),
    ]
    rows += [(f"{name}: CPU / peak RSS", f"{part['cpu_s']:.0f} s / {part['peak_rss_mib']:.0f} MiB")
             for name, part in report["components"].items()]
    lines = ["| measurement | result |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    lines += ["", "| running jobs | controller CPU | controller writes/min | API server CPU | scheduler CPU | "
              "control plane CPU | hollow nodes CPU (pods + heartbeats) | controller RSS | load average |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for state in report["steady"]:
        share = state["cpu_share"]
        lines.append(f"| {state['jobs']} | {100 * state['controller_cpu_share']:.1f} % | {state['controller_writes_per_minute']:.1f} | "
                     f"{100 * share.get('API server', 0):.1f} % | {100 * share.get('scheduler', 0):.1f} % | "
                     f"{100 * share.get('control plane', 0):.1f} % | {100 * share.get('hollow nodes', 0):.1f} % + "
                     f"{100 * share.get('hollow heartbeats', 0):.1f} % | "
                     f"{state['controller_rss_mib']:.0f} MiB | {state['loadavg']:.1f} |")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steady = report["steady"]
    jobs = [s["jobs"] for s in steady]
    fig, (cpu_axis, writes_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for name in ("API server", "scheduler", "control plane", "hollow nodes", "hollow heartbeats"):
        cpu_axis.plot(jobs, [100 * s["cpu_share"].get(name, 0) for s in steady], marker="o", label=name)
    cpu_axis.plot(jobs, [100 * s["controller_cpu_share"] for s in steady], marker="o", linewidth=2.5, label="controller")
    cpu_axis.set_xlabel("running jobs (10 pods each)")
    cpu_axis.set_ylabel("CPU, % of one core (steady state)")
    cpu_axis.legend(fontsize=8)
    writes_axis.plot(jobs, [s["controller_writes_per_minute"] for s in steady], marker="o", label="controller writes/min")
    writes_axis.plot(jobs, [s["controller_rss_mib"] for s in steady], marker="s", label="controller RSS, MiB")
    writes_axis.set_xlabel("running jobs (10 pods each)")
    writes_axis.legend(fontsize=8)
    fig.suptitle(f"trainctl at scale: {report['size']['nodes']} hollow nodes, steady state")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized smoke run (10 nodes, 10 jobs)")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--steady-seconds", type=float)
    parser.add_argument("--create-rate", type=float, help="jobs created per second")
    parser.add_argument("--controller-arg", action="append", default=[], help="passed to both controllers (repeat)")
    parser.add_argument("--dir", type=Path, help="cluster directory (default: a temporary one)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    overrides = {k: v for k, v in (("nodes", args.nodes), ("jobs", args.jobs), ("workers", args.workers),
                                   ("steady_seconds", args.steady_seconds), ("create_rate", args.create_rate)) if v}
    size = Size(**{**size.__dict__, **overrides})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the cluster and the controllers on the way out
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        report = run(size, args.dir or Path(tmp), args.controller_arg)
    print(table(report))
    print(f"wall time {report['wall_s']:.0f} s, load average at start {report['loadavg']['start'][0]:.1f}, "
          f"at end {report['loadavg']['end'][0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    if args.plot:
        plot(report, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
