"""Faults a person can cause to the embedded cluster's nodes, in one registry.

Each kind is a :class:`~.fault.NodeFault` in a module of its own with the kind that undoes it
(:mod:`.kill`: kill and start, :mod:`.freeze`: freeze and thaw, :mod:`.partition`: partition
and heal, :mod:`.degrade`: degrade and restore, :mod:`.preempt`: a reclaim with notice, mended by start), registered below with one line. ``trainctl local node`` makes a subcommand of
every registered kind, :class:`~trainctl.cluster.local_cluster.LocalCluster` applies them
in-process (``cluster.fault("kill", node)``), and the tests use both. What the user did to a
node is kept in its state file (:func:`trainctl.cluster.machines.node_state`): the supervisor
leaves a killed node down and ``trainctl local status`` says it.

Faults of one pod (:data:`POD_FAULTS`, :mod:`.pod_freeze`: freeze and thaw, a hung rank on a
healthy node) are ``trainctl local pod`` and ``LocalCluster.pod_fault``.

docs/architecture.md ("Adding a node fault") says how to add one.
"""

from __future__ import annotations

from trainctl.cluster.faults.degrade import DEGRADE, RESTORE, forget_degradation
from trainctl.cluster.faults.fault import FaultFlag, NodeFault, NodeHost
from trainctl.cluster.faults.freeze import FREEZE, THAW, thaw_frozen
from trainctl.cluster.faults.kill import KILL, START
from trainctl.cluster.faults.partition import HEAL, PARTITION
from trainctl.cluster.faults.pod_freeze import POD_FAULTS, PodFault
from trainctl.cluster.faults.preempt import PREEMPT

NODE_FAULTS: dict[str, NodeFault] = {}


def register(fault: NodeFault) -> None:
    if fault.name in NODE_FAULTS:
        raise ValueError(f"node fault {fault.name!r} is registered twice")
    NODE_FAULTS[fault.name] = fault


# The order is the order ``trainctl local node --help`` lists them in.
register(KILL)
register(FREEZE)
register(THAW)
register(START)
register(PARTITION)
register(HEAL)
register(DEGRADE)
register(RESTORE)
register(PREEMPT)

__all__ = ["NODE_FAULTS", "POD_FAULTS", "FaultFlag", "NodeFault", "NodeHost", "PodFault", "forget_degradation", "register",
           "thaw_frozen"]
