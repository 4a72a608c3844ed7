"""Zone disruption: how fast the node lifecycle controller may taint nodes for eviction.

kube-controller-manager does not evict from every node that stops answering. Per zone
(``topology.kubernetes.io/region`` and ``zone`` labels; one zone when they are absent) it
counts Ready and not-Ready nodes:

- Normal: NoExecute taints are added at ``--node-eviction-rate`` nodes per second (0.1,
  one token bucket of burst 1 per zone);
- PartialDisruption (more than 2 not Ready, and at least ``--unhealthy-zone-threshold``
  55 % of the zone): ``--secondary-node-eviction-rate`` (0.01), or none at all in a zone of
  ``--large-cluster-size-threshold`` (50) nodes or fewer;
- FullDisruption (no node Ready): the normal rate, unless *every* zone is fully disrupted.
  Then the controller assumes that it, not the nodes, is cut off: it removes the NoExecute
  taints of every node and taints nothing until some node is Ready again, and on that
  return gives every node a fresh grace period.

So a one-node cluster whose node hangs sees Ready=Unknown but no eviction, as on a real
one. Nodes labelled ``node.kubernetes.io/exclude-disruption`` do not count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, Optional

Obj = dict[str, Any]

NORMAL = "Normal"
PARTIAL = "PartialDisruption"
FULL = "FullDisruption"
EXCLUDE_LABEL = "node.kubernetes.io/exclude-disruption"


@dataclass(frozen=True)
class DisruptionConfig:
    node_eviction_rate: float = 0.1
    secondary_node_eviction_rate: float = 0.01
    unhealthy_zone_threshold: float = 0.55
    large_cluster_size_threshold: int = 50


@dataclass(frozen=True)
class Bucket:
    """A token bucket of burst 1, as the controller's per-zone tainting limiter."""

    tokens: float
    at: datetime

    def refilled(self, rate: float, now: datetime) -> "Bucket":
        elapsed = max(0.0, (now - self.at).total_seconds())
        return Bucket(min(1.0, self.tokens + elapsed * rate), now)


def zone_of(node: Obj) -> str:
    labels = (node.get("metadata") or {}).get("labels") or {}
    region = labels.get("topology.kubernetes.io/region") or labels.get("failure-domain.beta.kubernetes.io/region") or ""
    zone = labels.get("topology.kubernetes.io/zone") or labels.get("failure-domain.beta.kubernetes.io/zone") or ""
    return f"{region}:\x00:{zone}" if region or zone else ""


def zone_state(ready_statuses: Iterable[Optional[str]], config: DisruptionConfig) -> str:
    statuses = list(ready_statuses)
    ready = sum(1 for s in statuses if s == "True")
    not_ready = len(statuses) - ready
    if ready == 0 and not_ready > 0:
        return FULL
    if not_ready > 2 and not_ready / (ready + not_ready) >= config.unhealthy_zone_threshold:
        return PARTIAL
    return NORMAL


def tainting_rate(state: str, zone_size: int, config: DisruptionConfig) -> float:
    if state == PARTIAL:
        return config.secondary_node_eviction_rate if zone_size > config.large_cluster_size_threshold else 0.0
    return config.node_eviction_rate


@dataclass(frozen=True)
class Zones:
    """This pass's verdict: whether all zones are down, and each zone's tainting budget."""

    all_fully_disrupted: bool
    rates: Mapping[str, float]
    buckets: Mapping[str, Bucket]


def assess(nodes: Iterable[Obj], buckets: Mapping[str, Bucket], now: datetime, config: DisruptionConfig) -> Zones:
    """``nodes`` as this pass leaves their conditions; ``buckets`` from the previous pass."""
    members: dict[str, list[Optional[str]]] = {}
    for node in nodes:
        if EXCLUDE_LABEL in ((node.get("metadata") or {}).get("labels") or {}):
            continue
        ready = next((c.get("status") for c in (node.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"), None)
        members.setdefault(zone_of(node), []).append(ready)
    states = {zone: zone_state(statuses, config) for zone, statuses in members.items()}
    everything_down = bool(states) and all(s == FULL for s in states.values())
    rates = {zone: 0.0 if everything_down else tainting_rate(states[zone], len(members[zone]), config) for zone in states}
    refilled = {zone: buckets.get(zone, Bucket(1.0, now)).refilled(rates[zone], now) for zone in states}
    return Zones(everything_down, rates, refilled)
