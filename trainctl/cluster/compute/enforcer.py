"""Choose a node's resource enforcer: cgroup v2, else cgroup v1, else process-tree polling.

Detection happens once, when the kubelet starts: a cgroup back end is used only if the
controllers it needs are mounted and this process may create groups in them; whichever runs
says so in :meth:`Enforcer.describe`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import Callable, Optional, Sequence

from trainctl.cluster.compute import cgroups, polling
from trainctl.cluster.compute.accounting import Enforcer
from trainctl.cluster.compute.cgroups import Hierarchy

log = logging.getLogger(__name__)

KINDS = ("cgroup-v2", "cgroup-v1", "polling")


def cluster_key(state_dir: Path) -> str:
    """A short name for the cluster kept in ``state_dir``, so that two clusters on one machine
    never clean up each other's groups."""
    return hashlib.sha256(str(Path(state_dir).resolve()).encode()).hexdigest()[:12]


def _group_name(value: str) -> str:
    if not value or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value):
        raise ValueError(f"{value!r} cannot name a cgroup")
    return value


def _v2(hierarchies: Sequence[Hierarchy], cluster: str, node: str) -> Optional[Enforcer]:
    for hierarchy in hierarchies:
        if hierarchy.version == 2 and set(cgroups.V2_CONTROLLERS) <= hierarchy.controllers:
            return cgroups.CgroupV2Enforcer(hierarchy.mount, cluster=cluster, node=node)
    return None


def _v1(hierarchies: Sequence[Hierarchy], cluster: str, node: str) -> Optional[Enforcer]:
    mounts = {controller: hierarchy.mount for hierarchy in hierarchies if hierarchy.version == 1
              for controller in hierarchy.controllers}
    if not set(cgroups.V1_CONTROLLERS) <= mounts.keys():
        return None
    return cgroups.CgroupV1Enforcer(mounts, cluster=cluster, node=node)


def _polling(hierarchies: Sequence[Hierarchy], cluster: str, node: str) -> Enforcer:
    return polling.PollingEnforcer(node=node)


_BACKENDS: dict[str, Callable[[Sequence[Hierarchy], str, str], Optional[Enforcer]]] = {
    "cgroup-v2": _v2, "cgroup-v1": _v1, "polling": _polling}


def remove_cluster(*, cluster: str, hierarchies: Optional[Sequence[Hierarchy]] = None) -> list[Path]:
    """Kill and remove the cgroups of every node of ``cluster`` (``trainctl local down``, or a
    cluster whose supervisor died); the group directories removed."""
    return cgroups.remove_cluster(_group_name(cluster),
                                  cgroups.system_hierarchies() if hierarchies is None else hierarchies)


def detect(*, cluster: str, node: str, force: Optional[str] = None,
           hierarchies: Optional[Sequence[Hierarchy]] = None) -> Enforcer:
    """The first back end of cgroup v2, cgroup v1, polling that works here for ``node``.

    ``force`` names one back end (see :data:`KINDS`) and fails (OSError, or RuntimeError when
    the machine lacks it) instead of falling back.
    """
    _group_name(cluster), _group_name(node)
    found = cgroups.system_hierarchies() if hierarchies is None else hierarchies
    if force is not None:
        if force not in _BACKENDS:
            raise ValueError(f"unknown resource enforcer {force!r}; one of {', '.join(KINDS)}")
        enforcer = _BACKENDS[force](found, cluster, node)
        if enforcer is None:
            raise RuntimeError(f"{force} is not available on this machine")
        return enforcer
    for kind in KINDS:
        try:
            enforcer = _BACKENDS[kind](found, cluster, node)
        except OSError as exc:  # mounted, but not ours to write
            log.info("resource enforcer %s unusable: %s", kind, exc)
            continue
        if enforcer is not None:
            return enforcer
    raise AssertionError("polling is always available")
