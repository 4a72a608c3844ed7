"""The ReplicationController manager: core/v1 ReplicationControllers, the ReplicaSet's elder.

A ReplicationController is a ReplicaSet whose selector is a plain label map (equality only),
and kube-controller-manager runs both with the same code, reading each ReplicationController
as a ReplicaSet. So does this one: :class:`ReplicationManager` is the ReplicaSet controller on
``replicationcontrollers``, its pods owned by ``v1/ReplicationController`` and its Events
from ``replication-controller``, kube's component name.
"""

from __future__ import annotations

from typing import Any

from trainctl.cluster.controlplane.replicaset_controller import ReplicaSetController
from trainctl.kube import restmapper as r

Obj = dict[str, Any]


def as_replicaset(controller: Obj) -> Obj:
    """The ReplicationController with its selector as a LabelSelector (``matchLabels``)."""
    spec = controller.get("spec") or {}
    selector = spec.get("selector")
    return {**controller, "spec": {**spec, "selector": {"matchLabels": dict(selector) if selector else {}}}}


class ReplicationManager(ReplicaSetController):
    resource = r.REPLICATIONCONTROLLERS
    owner = ("v1", "ReplicationController")
    component = "replication-controller"
    loop_name = "replicationcontroller"

    def as_replicaset(self, obj: Obj) -> Obj:
        return as_replicaset(obj)
