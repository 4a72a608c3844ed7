"""``degrade`` and ``restore``: the machine runs on, slowly or with a bad data link.

Unlike the other faults nothing announces these: the node stays Ready, its pods Running.

- ``--cpu PERCENT``: each container of the node is held to PERCENT of its ``limits.cpu``, or of
  one core when it has none (CFS quota, applied by the node's kubelet, which alone knows the
  limits; :mod:`trainctl.cluster.compute.cpu_cap`), containers started later too. A node whose
  kubelet enforces no CPU limits (the polling enforcer: no writable cgroup cpu controller)
  refuses it. A killed or frozen node's kubelet applies it when it runs again.
- ``--net-loss PERCENT``: that share of the packets crossing the node's pods' links is dropped,
  each way; 100 is a dead data link while the kubelet's own path to the API server, which is
  not a pod link, keeps the node Ready (:mod:`trainctl.cluster.network.degrade`).
- ``--net-delay DURATION``: packets to the node's pods are held that long, where the kernel
  has ``sch_netem``; elsewhere refused, saying so.

The network faults need the isolated pod network (its router owns the links). What a node
was degraded with is kept in ``run/degraded/<node>.json``, so ``restore`` undoes exactly that
and ``trainctl local status`` can say it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Union

from trainctl.api.durations import parse_duration
from trainctl.cluster.compute import cpu_cap
from trainctl.cluster.faults.fault import FaultFlag, NodeFault, NodeHost
from trainctl.cluster.faults.partition import ask_router
from trainctl.cluster.machines import FROZEN, KILLED, NodeError, find_node, node_state

DEGRADED_DIR = Path("run") / "degraded"
CPU_CAP_SECONDS = 30.0  # how long a running kubelet may take to apply a CPU cap (a loaded machine)

Number = Union[int, str, None]


def degraded_file(directory: Path, name: str) -> Path:
    return directory / DEGRADED_DIR / f"{name}.json"


def degradation(directory: Path, name: str) -> dict[str, Any]:
    """What ``name`` is degraded with: ``cpu``, ``net_loss`` (percents), ``net_delay`` (text)."""
    try:
        found = json.loads(degraded_file(directory, name).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def describe(degraded: dict[str, Any]) -> str:
    """``degraded: cpu 20%, net-loss 100%`` for status lines ("" when not degraded)."""
    parts = [f"cpu {degraded['cpu']}%" if "cpu" in degraded else "",
             f"net-loss {degraded['net_loss']}%" if "net_loss" in degraded else "",
             f"net-delay {degraded['net_delay']}" if "net_delay" in degraded else ""]
    return "degraded: " + ", ".join(p for p in parts if p) if degraded else ""


def _record(directory: Path, name: str, degraded: dict[str, Any]) -> None:
    path = degraded_file(directory, name)
    if not degraded:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(degraded, sort_keys=True))


def forget_degradation(directory: Path, name: str) -> None:
    """A new run of the cluster: its router and kubelets start whole, and so does the record."""
    cpu_cap.forget(directory, name)
    _record(directory, name, {})


def percent(value: Number, what: str) -> Optional[int]:
    """A whole percent from 0 to 100 given as a number or its text (None: not asked)."""
    if value is None:
        return None
    try:
        number = int(str(value).strip().removesuffix("%"))
    except ValueError:
        raise NodeError(f"{what} must be a whole percent from 0 to 100, not {value!r}") from None
    if not 0 <= number <= 100:
        raise NodeError(f"{what} must be a whole percent from 0 to 100, not {value!r}")
    return number


def delay_ms(value: Number) -> Optional[int]:
    """Milliseconds of a duration (``100ms``, ``0.5s``; a bare number is seconds)."""
    if value is None:
        return None
    seconds = parse_duration(str(value))
    if seconds is None:
        raise NodeError(f"--net-delay must be a duration like 100ms or 1s, not {value!r}")
    return round(seconds * 1000)


def _cap_cpu(directory: Path, name: str, cap: Optional[int]) -> None:
    serial = cpu_cap.ask(directory, name, cap)
    if node_state(directory, name) in (KILLED, FROZEN):
        return  # its kubelet reads the request when it runs again
    try:
        error = cpu_cap.wait_applied(directory, name, serial, CPU_CAP_SECONDS)
    except TimeoutError as exc:
        raise NodeError(f"{exc}; it applies it when it runs again") from None
    if error:
        cpu_cap.ask(directory, name, None)  # not left for a later kubelet to apply by surprise
        raise NodeError(f"node {name}: CPU cap refused: {error}")


def _degrade_links(directory: Path, name: str, **links: int) -> None:
    ask_router(directory, {"op": "degrade", "node": name, **links}, "a degraded data link")


def degrade_node(directory: Path, name: str, cpu: Number = None, net_loss: Number = None,
                 net_delay: Number = None) -> dict[str, Any]:
    """Apply what is asked (on top of what the node is already degraded with); the node's
    degradation afterwards."""
    find_node(directory, name)
    cap, loss, delay = percent(cpu, "--cpu"), percent(net_loss, "--net-loss"), delay_ms(net_delay)
    if cap is None and loss is None and delay is None:
        raise NodeError("say how to degrade the node: --cpu PERCENT, --net-loss PERCENT and/or --net-delay DURATION")
    if cap == 0:
        raise NodeError("--cpu must be from 1 to 100: a node's containers cannot run on no CPU at all")
    degraded = degradation(directory, name)
    links = {key: value for key, value in (("loss", loss), ("delay_ms", delay)) if value is not None}
    if links:
        _degrade_links(directory, name, **links)
        if loss is not None:
            degraded["net_loss"] = loss
        if delay is not None:
            degraded["net_delay"] = f"{delay}ms"
        degraded = {k: v for k, v in degraded.items() if v not in (0, "0ms")}
        _record(directory, name, degraded)
    if cap is not None:
        _cap_cpu(directory, name, cap)
        degraded["cpu"] = cap
        _record(directory, name, degraded)
    return degraded


def restore_node(directory: Path, name: str) -> None:
    """Undo every degradation of ``name``: its containers get their own CPU limits back, its
    pods' links lose and delay nothing."""
    find_node(directory, name)
    degraded = degradation(directory, name)
    if not degraded:
        raise NodeError(f"node {name} is not degraded")
    if "net_loss" in degraded or "net_delay" in degraded:
        _degrade_links(directory, name, loss=0, delay_ms=0)
        degraded = {k: v for k, v in degraded.items() if k not in ("net_loss", "net_delay")}
        _record(directory, name, degraded)
    if "cpu" in degraded:
        _cap_cpu(directory, name, None)
    _record(directory, name, {})


def degrade(host: NodeHost, node: str, cpu: Number = None, net_loss: Number = None, net_delay: Number = None) -> None:
    degrade_node(host.directory, node, cpu=cpu, net_loss=net_loss, net_delay=net_delay)


def restore(host: NodeHost, node: str) -> None:
    restore_node(host.directory, node)


DEGRADE = NodeFault(
    "degrade", "the machine runs on, slowly or with a bad data link: its pods' CPU capped, their links lossy or slow",
    "Node {node} degraded; it stays Ready (undo: trainctl local node restore {node}).", degrade, undo="restore",
    flags=(FaultFlag("--cpu", "cpu", "each of its containers gets PERCENT of its CPU limit, or of one core without "
                                     "one (1-100; cgroup enforcers only)", "PERCENT"),
           FaultFlag("--net-loss", "net_loss", "its pods' links drop PERCENT of the packets crossing them, each "
                                               "way (0-100; 100: a dead data link; isolated network)", "PERCENT"),
           FaultFlag("--net-delay", "net_delay", "packets to its pods are held DURATION, e.g. 100ms (needs the "
                                                 "kernel's sch_netem; isolated network)", "DURATION")))
RESTORE = NodeFault("restore", "a degraded machine is whole again: its pods' CPU limits and links as before",
                    "Node {node} restored.", restore)
