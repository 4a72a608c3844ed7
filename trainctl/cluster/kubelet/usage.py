"""The kubelet's side of the Metrics API: sample each running container's usage, publish rates.

As metrics-server reads the kubelet's resource metrics, this loop reads every running
container's resource group every few seconds (so a rate spans a recent window even when a
container is short-lived), and every ``interval`` seconds publishes the node's NodeMetrics
and its pods' PodMetrics through :func:`metrics_publish.publish`. A node's usage is what the
node itself costs, as a real node's root cgroup counts it: the sum of its pods' plus the
kubelet's own process (this machine's other processes, other nodes' kubelets among them,
are not this node's).
"""

from __future__ import annotations

import logging
import os
import resource
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from trainctl.cluster import metrics_publish
from trainctl.cluster.compute import pod_metrics
from trainctl.cluster.compute.accounting import Usage
from trainctl.cluster.kubelet.pod_worker import PodWorker
from trainctl.kube.client import KubeClient

log = logging.getLogger(__name__)

ContainerKey = tuple[str, str]  # (pod uid, container name)
KUBELET_KEY: ContainerKey = ("", "kubelet")  # the kubelet's own process, beside the containers


def process_usage() -> Usage:
    """This process's CPU time (every thread's) and resident memory."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            resident_pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        resident_pages = 0
    return Usage(cpu_seconds=used.ru_utime + used.ru_stime, memory_bytes=resident_pages * os.sysconf("SC_PAGE_SIZE"))


def node_rate(rates: list[pod_metrics.Rate], *, now: float, window_seconds: float) -> pod_metrics.Rate:
    """The sum of the containers' rates (an idle node: zero over the nominal window)."""
    return pod_metrics.Rate(nanocores=sum(rate.nanocores for rate in rates),
                        memory_bytes=sum(rate.memory_bytes for rate in rates),
                        timestamp=max((rate.timestamp for rate in rates), default=now),
                        window_seconds=max((rate.window_seconds for rate in rates), default=window_seconds))


class UsagePublisher:
    """Samples the containers of ``workers()`` and publishes their metrics for ``node``."""

    def __init__(self, client: KubeClient, node: str, workers: Callable[[], Mapping[str, PodWorker]], *,
                 node_labels: Callable[[], Mapping[str, str]] = dict,
                 interval: float = metrics_publish.DEFAULT_INTERVAL_SECONDS,
                 own_usage: Callable[[], Usage] = process_usage) -> None:
        self.client = client
        self.own_usage = own_usage
        self.node = node
        self.workers = workers
        self.node_labels = node_labels
        self.interval = interval
        # Sample often enough for a rate within one publication, but no more than every 5 s.
        self.sample_seconds = min(5.0, max(0.2, interval / 3))
        self.history: pod_metrics.UsageHistory[ContainerKey] = pod_metrics.UsageHistory(
            window_seconds=min(pod_metrics.DEFAULT_WINDOW_SECONDS, interval))
        self._known: set[ContainerKey] = set()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubelet-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=10)

    def sample(self) -> None:
        """Record a usage sample of every running container; forget containers that ended."""
        now = time.time()
        running: set[ContainerKey] = set()
        for uid, worker in self.workers().items():
            for name, group in worker.container_groups().items():
                try:
                    usage = group.usage()
                except OSError:  # the group went away meanwhile
                    continue
                running.add((uid, name))
                self.history.record((uid, name), pod_metrics.Sample(time=now, usage=usage))
        self.history.record(KUBELET_KEY, pod_metrics.Sample(time=now, usage=self.own_usage()))
        for key in self._known - running:
            self.history.forget(key)
        self._known = running

    def report(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The NodeMetrics and PodMetrics of what was sampled."""
        pods = []
        rates: list[pod_metrics.Rate] = []
        for uid, worker in self.workers().items():
            meta = worker.pod.get("metadata", {})
            containers = {name: rate for name in worker.container_groups()
                          if (rate := self.history.rate((uid, name))) is not None}
            rates.extend(containers.values())
            pod = pod_metrics.pod_metrics(name=meta.get("name", ""), namespace=worker.namespace,
                                      labels=meta.get("labels"), containers=containers)
            if pod is not None:
                pods.append(pod)
        if (own := self.history.rate(KUBELET_KEY)) is not None:
            rates.append(own)
        node = pod_metrics.node_metrics(name=self.node, labels=self.node_labels(),
                                    rate=node_rate(rates, now=time.time(), window_seconds=self.interval))
        return node, pods

    def publish(self) -> None:
        node, pods = self.report()
        metrics_publish.publish(self.client, self.node, node, pods, interval=self.interval)

    def _run(self) -> None:
        next_publication = time.monotonic() + self.interval
        while not self._stopped.wait(self.sample_seconds):
            try:
                self.sample()
                if time.monotonic() >= next_publication:
                    next_publication = time.monotonic() + self.interval
                    self.publish()
            except Exception as exc:  # the API server may be restarting: next time
                log.debug("metrics publication failed: %s", exc)
