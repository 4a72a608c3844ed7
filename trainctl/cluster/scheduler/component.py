"""The scheduler process: watch Pods and Nodes, place every pending pod on one pass per change.

Each pass sees every Node (its allocatable, labels, taints, cordon) with the non-terminal
pods bound to it, and the Namespaces' labels (for inter-pod terms' ``namespaceSelector``), and
hands the pending pods to :class:`~.binding.Scheduler` in queue order. Its Events are written
by :class:`~.events.SchedulerEvents`, off the loop.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Optional

from trainctl.kube.client import KubeClient
from trainctl.kube.informer import Informer
from trainctl.kube.podstatus import StatusWriter
from trainctl.kube.resources import NAMESPACES, NODES, PODS

from .binding import Scheduler
from .events import SchedulerEvents
from .rules import NodeResources, is_terminal, port_free_on_machine

log = logging.getLogger(__name__)

Obj = dict[str, Any]
RETRY_SECONDS = 2.0


def node_views(nodes: Sequence[Obj], pods: Sequence[Obj], assumed: dict[str, str]) -> list[NodeResources]:
    """Every node, sorted by name, with the live pods bound (or assumed) to it."""
    by_node: dict[str, list[Obj]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        name = (pod.get("spec") or {}).get("nodeName") or assumed.get(meta.get("uid", ""))
        if name and not is_terminal(pod):
            by_node.setdefault(name, []).append(pod)
    ordered = sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name", ""))
    views = []
    for node in ordered:
        name = node["metadata"]["name"]
        others = tuple(p for other, bound in by_node.items() if other != name for p in bound)
        views.append(replace(NodeResources.from_node(node, by_node.get(name, ())), neighbours=others))
    return views


class SchedulerComponent:
    """One scheduling loop over the cluster's pods and nodes."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.events = SchedulerEvents(client)
        self.scheduler = Scheduler(client, StatusWriter(client), port_free_on_machine, self.events)
        self._dirty = threading.Event()
        self._stopped = threading.Event()
        self.pods = Informer(client, PODS, retry_delay=0.05, max_retry_delay=2.0, on_synced=self._dirty.set)
        self.nodes = Informer(client, NODES, retry_delay=0.05, max_retry_delay=2.0, on_synced=self._dirty.set)
        self.namespaces = Informer(client, NAMESPACES, retry_delay=0.05, max_retry_delay=2.0, on_synced=self._dirty.set)
        for informer in (self.pods, self.nodes, self.namespaces):
            informer.add_handler(lambda _event, _new, _old: self._dirty.set())
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self.events.start()
        self.pods.start()
        self.nodes.start()
        self.namespaces.start()
        self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._dirty.set()
        self.pods.stop()
        self.nodes.stop()
        self.namespaces.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.events.stop()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._dirty.wait(RETRY_SECONDS if self.scheduler.waiting_for_machine_ports else None)
            if self._stopped.is_set():
                break
            self._dirty.clear()
            try:
                self.sync()
            except Exception:
                log.exception("scheduling pass failed; retrying")
                self._stopped.wait(0.5)
                self._dirty.set()

    def sync(self) -> None:
        if not all(informer.synced.is_set() for informer in (self.pods, self.nodes, self.namespaces)):
            return  # as kube-scheduler waits for its caches: a pass before the nodes are listed sees none
        pods = [p for p in self.pods.store.list() if isinstance(p.get("spec"), dict) and (p.get("metadata") or {}).get("uid")]
        self.scheduler.observe({p["metadata"]["uid"]: p for p in pods})
        pending = self.scheduler.pending(pods)
        if not pending:
            return
        views = self.scheduler.new_pass(node_views(self.nodes.store.list(), pods, self.scheduler.assumed()),
                                        self._namespace_labels())
        for pod in pending:
            try:
                self.scheduler.place(pod, views)
            except Exception:
                log.exception("scheduling %s/%s failed", pod["metadata"].get("namespace"), pod["metadata"].get("name"))


    def _namespace_labels(self) -> dict[str, Any]:
        return {(ns.get("metadata") or {}).get("name", ""): (ns.get("metadata") or {}).get("labels") or {}
                for ns in self.namespaces.store.list()}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainctl.cluster.scheduler")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    client = KubeClient.from_kubeconfig(args.kubeconfig, qps=0, max_attempts=1, pool_size=4)
    component = SchedulerComponent(client)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    component.start()
    log.info("scheduler running")
    while not stop.wait(3600):
        pass
    component.stop()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
