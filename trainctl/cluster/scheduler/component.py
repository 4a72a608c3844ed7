"""The scheduler process: watch Pods and Nodes, place every pending pod on one pass per change.

Each pass sees every Node (its allocatable, labels, taints, cordon) with the non-terminal
pods bound to it, the Namespaces' labels (for inter-pod terms' ``namespaceSelector``) and the
PodDisruptionBudgets (which preemption weighs), and
hands the pending pods to :class:`~.binding.Scheduler` in queue order. Its Events are written
by :class:`~.scheduling_events.SchedulerEvents`, off the loop.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from trainctl.cluster.scheduler.binding import Scheduler
from trainctl.cluster.scheduler.fit import port_free_on_machine
from trainctl.cluster.scheduler.freshness import NodeFreshness
from trainctl.cluster.scheduler.scheduling_events import SchedulerEvents
from trainctl.cluster.scheduler.views import NodeViews
from trainctl.kube.client import KubeClient
from trainctl.kube.informer import Informer
from trainctl.kube.podstatus import StatusWriter
from trainctl.kube.restmapper import NAMESPACES, NODES, PDBS, PODS

log = logging.getLogger(__name__)

Obj = dict[str, Any]
RETRY_SECONDS = 2.0
BINDERS = 16  # bindings in flight at once


class SchedulerComponent:
    """One scheduling loop over the cluster's pods and nodes."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.events = SchedulerEvents(client)
        self._dirty = threading.Event()
        self._binder = ThreadPoolExecutor(BINDERS, thread_name_prefix="bind")
        self._stopped = threading.Event()
        self.pods = Informer(client, PODS, retry_delay=0.05, max_retry_delay=2.0, on_synced=self._dirty.set)
        self.nodes = Informer(client, NODES, retry_delay=0.05, max_retry_delay=2.0, on_synced=self._dirty.set)
        self.namespaces = Informer(client, NAMESPACES, retry_delay=0.05, max_retry_delay=2.0, on_synced=self._dirty.set)
        # PodDisruptionBudgets, which preemption weighs (a change to one wakes no pass).
        self.budgets = Informer(client, PDBS, retry_delay=0.05, max_retry_delay=2.0, on_synced=self._dirty.set)
        self.views = NodeViews()
        freshness = NodeFreshness(client, self.views, self.pods, self.nodes)
        self.scheduler = Scheduler(client, StatusWriter(client), port_free_on_machine, self.events,
                                   binder=self._binder, on_bind_failed=self._dirty.set, node_check=freshness.confirm)
        self.pods.add_handler(self.views.on_pod)  # filed before the pass this event wakes reads them
        self.nodes.add_handler(self.views.on_node)
        for informer in (self.pods, self.nodes, self.namespaces):
            informer.add_handler(lambda _event, _new, _old: self._dirty.set())
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self.events.start()
        self.pods.start()
        self.nodes.start()
        self.namespaces.start()
        self.budgets.start()
        self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._dirty.set()
        self.pods.stop()
        self.nodes.stop()
        self.namespaces.stop()
        self.budgets.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.events.stop()
        self._binder.shutdown(wait=True)

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
        if not all(informer.synced.is_set() for informer in (self.pods, self.nodes, self.namespaces, self.budgets)):
            return  # as kube-scheduler waits for its caches: a pass before the nodes are listed sees none
        by_uid, unbound = self.views.pods()
        self.scheduler.observe(by_uid)
        pending = self.scheduler.pending(unbound)
        if not pending:
            return
        views = self.scheduler.new_pass(self.views.views(self.scheduler.assumed()), self._namespace_labels(),
                                        self.budgets.store.list())
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
    client = KubeClient.from_kubeconfig(args.kubeconfig, qps=0, max_attempts=1, pool_size=BINDERS + 4,
                                        component="kube-scheduler")
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
