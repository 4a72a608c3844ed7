"""The controller's view of the cluster: informer caches of jobs, their children and Nodes.

A reconcile reads only from here, never from the API (the workers would otherwise cost a
GET per child per pass). Children are the pods and Services carrying the operator label,
the HPAs and, with a gang scheduler, the PodGroups, kept only when a job controls them;
Nodes are all of them, for the lost-node rule and the ceiling of an out-of-memory
relaunch. :meth:`Caches.observed` is what the core is given about one job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.controller.keys import JobKey, is_job_kind
from trainctl.controller.options import ManagerOptions
from trainctl.controller.reconcile import oom
from trainctl.controller.reconcile.plan import Observed
from trainctl.kube import restmapper as r
from trainctl.kube.client import KubeClient
from trainctl.kube.expectations import ChildKey
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controller")

CHILD_SELECTOR = c.LABEL_OPERATOR_NAME  # every pod and service a job owns carries it
GANG_SCHEDULERS = {"volcano": r.VOLCANO_PODGROUPS}


class GangSchedulerMissing(Exception):
    """The PodGroup CRD the configured gang scheduler needs is not installed."""


def pod_group_resource(gang_scheduler: Optional[str]) -> Optional[r.Resource]:
    """Volcano for ``volcano`` (any case), scheduler-plugins for any other name, None when off."""
    if not gang_scheduler:
        return None
    return GANG_SCHEDULERS.get(gang_scheduler.lower(), r.SCHEDULER_PLUGINS_PODGROUPS)


def _owned_by_a_job(obj: dict[str, Any]) -> bool:
    owner = r.controller_owner(obj)
    return owner is not None and is_job_kind(owner.get("kind"))


class LargestNodeMemory:
    """The most memory any Node offers a pod, recomputed only after a Node came, went or
    changed its memory, not on every pass (Node heartbeats are frequent)."""

    def __init__(self, nodes: Informer) -> None:
        self._nodes = nodes
        self._value: Optional[int] = None
        self._stale = True
        self._lock = threading.Lock()
        nodes.add_handler(self._on_node_event)

    def _on_node_event(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        if new is None or old is None or oom.node_memory(new) != oom.node_memory(old):
            self._stale = True  # set after the store changed: the next look sees the change

    def get(self) -> Optional[int]:
        with self._lock:
            if self._stale:
                self._stale = False
                self._value = oom.largest_node_memory(self._nodes.store.list())
            return self._value


class Caches:
    """One informer per job kind, per child kind and for Nodes, and the reads made of them."""

    def __init__(self, client: KubeClient, options: ManagerOptions) -> None:
        self.client = client
        self.gang_scheduler = options.gang_scheduler
        ns, timeout = options.namespace, options.watch_timeout
        self.namespace, self.watch_timeout = ns, timeout
        self._child_handlers: list[Callable[[str, Optional[dict[str, Any]], Optional[dict[str, Any]]], None]] = []
        self.job_informers = {
            res.kind: Informer(client, res, namespace=ns, watch_timeout=timeout) for res in r.job_resources()
        }
        owned = _owned_by_a_job
        self.child_informers = {
            "Pod": Informer(client, r.PODS, namespace=ns, label_selector=CHILD_SELECTOR, keep=owned, watch_timeout=timeout),
            "Service": Informer(client, r.SERVICES, namespace=ns, label_selector=CHILD_SELECTOR, keep=owned, watch_timeout=timeout),
            # The reference does not label HPAs, so they are selected by owner instead.
            "HorizontalPodAutoscaler": Informer(client, r.HPAS, namespace=ns, keep=owned, watch_timeout=timeout),
        }
        self.pod_group_resource = pod_group_resource(options.gang_scheduler)
        if self.pod_group_resource is not None:
            self.child_informers["PodGroup"] = Informer(
                client, self.pod_group_resource, namespace=ns, keep=owned, watch_timeout=timeout
            )
        # Nodes, for the lost-node rule (trainctl extension): cluster-scoped, all of them.
        self.node_informer = Informer(client, r.NODES, watch_timeout=timeout)
        self.largest_node_memory = LargestNodeMemory(self.node_informer)

    # --- lifecycle --------------------------------------------------------------------------
    def check_prerequisites(self) -> None:
        """Fail fast on what cannot fix itself; warn about CRDs that may still be installed.

        Raises :class:`ApiError` when the API server cannot be used at all (unreachable,
        unauthorized), :class:`GangSchedulerMissing` when the PodGroup CRD is absent.
        """
        for res in r.job_resources():
            if not self.client.group_version_served(res.group, res.version):
                log.warning(
                    "CRD not installed yet; its jobs are picked up once it is",
                    extra={"crd": f"{res.plural}.{res.group}", "install": "kubectl apply -f manifests/crds/"},
                )
        self._watch_budgets_if_served()
        groups = self.pod_group_resource
        if groups is not None and not self.client.group_version_served(groups.group, groups.version):
            raise GangSchedulerMissing(
                f"gang scheduler {self.gang_scheduler!r} needs the PodGroup CRD "
                f"({groups.plural}.{groups.group}/{groups.version}), which is not installed"
            )

    def on_child_change(self, handler: Callable[[str, Optional[dict[str, Any]], Optional[dict[str, Any]]], None]) -> None:
        """Call ``handler`` on every change of a child, of the informers added later too."""
        self._child_handlers.append(handler)
        for informer in self.child_informers.values():
            informer.add_handler(handler)

    def _watch_budgets_if_served(self) -> None:
        """Add the PodDisruptionBudgets' informer, once, if the server serves policy/v1 (every
        real cluster does): an informer of a resource the server lacks would never sync."""
        if "PodDisruptionBudget" in self.child_informers or not self.client.group_version_served(r.PDBS.group, r.PDBS.version):
            return
        budgets = Informer(self.client, r.PDBS, namespace=self.namespace, keep=_owned_by_a_job, watch_timeout=self.watch_timeout)
        for handler in self._child_handlers:
            budgets.add_handler(handler)
        self.child_informers["PodDisruptionBudget"] = budgets

    def informers(self) -> list[Informer]:
        return [*self.job_informers.values(), *self.child_informers.values(), self.node_informer]

    def start(self) -> None:
        self._watch_budgets_if_served()
        for informer in self.informers():
            informer.start()

    def stop(self) -> None:
        for informer in self.informers():
            informer.stop()

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers())

    # --- reads ------------------------------------------------------------------------------
    def job(self, key: JobKey) -> Optional[dict[str, Any]]:
        informer = self.job_informers.get(key.kind)
        return informer.store.get(key.namespace, key.name) if informer else None

    def lookup(self, child: ChildKey) -> Optional[dict[str, Any]]:
        kind, namespace, name = child
        informer = self.child_informers.get(kind)
        return informer.store.get(namespace, name) if informer else None

    def pods_on(self, node_name: Optional[str]) -> list[dict[str, Any]]:
        return [pod for pod in self.child_informers["Pod"].store.list() if (pod.get("spec") or {}).get("nodeName") == node_name]

    def observed(self, job: dict[str, Any]) -> Observed:
        """The job's children, the Nodes its pods are on and the largest Node's memory."""
        uid = job["metadata"].get("uid", "")
        pods = self.child_informers["Pod"].store.owned_by(uid)
        return Observed(
            pods=pods,
            services=self.child_informers["Service"].store.owned_by(uid),
            hpa=next(iter(self.child_informers["HorizontalPodAutoscaler"].store.owned_by(uid)), None),
            pod_group=next(iter(self.child_informers["PodGroup"].store.owned_by(uid)), None)
            if "PodGroup" in self.child_informers
            else None,
            pdb=next(iter(self.child_informers["PodDisruptionBudget"].store.owned_by(uid)), None)
            if "PodDisruptionBudget" in self.child_informers
            else None,
            disruption_budgets="PodDisruptionBudget" in self.child_informers,
            nodes=self._nodes_of(pods),
            node_memory=self.largest_node_memory.get(),
        )

    def _nodes_of(self, pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for pod in pods:
            name = (pod.get("spec") or {}).get("nodeName")
            if name and name not in out:
                node = self.node_informer.store.get("", name)
                if node is not None:
                    out[name] = node
        return out

    # --- writes ------------------------------------------------------------------------------
    def write_through(self, job: dict[str, Any], updated: dict[str, Any]) -> None:
        """Put the API's answer to a write of ``job`` into the cache, unless the cache
        already holds a newer version."""
        informer = self.job_informers.get(job.get("kind", ""))
        if informer is not None:
            updated.setdefault("kind", job.get("kind"))
            updated.setdefault("apiVersion", job.get("apiVersion"))
            informer.store.upsert(updated, only_if_newer=True)
